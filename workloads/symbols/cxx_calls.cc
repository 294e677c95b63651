// std::sort and std::map through libstdc++: the C++ program of the name tests.
#include <algorithm>
#include <map>
#include <vector>
#include <string>
#include <cstdio>
namespace work {
template <typename T> struct Box { T v; bool operator<(const Box &o) const { return v < o.v; } };
__attribute__((noinline)) long fill_map(std::map<std::string, long> &m, int round) {
    for (int i = 0; i < 2000; i++) m[std::to_string((i * 7919 + round) % 5000)] += i;
    return (long)m.size();
}
__attribute__((noinline)) long sort_boxes(std::vector<Box<int>> &v, int round) {
    for (size_t i = 0; i < v.size(); i++) v[i].v = (int)((i * 2654435761u + round) & 0xffff);
    std::sort(v.begin(), v.end());
    return v[0].v;
}
}
int main() {
    std::map<std::string, long> m; std::vector<work::Box<int>> v(20000); long s = 0;
    for (int r = 0; r < 150; r++) { s += work::fill_map(m, r); s += work::sort_boxes(v, r); }
    std::printf("%ld\n", s);
}
