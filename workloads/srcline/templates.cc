// Source lines and inline chains of C++ (tests/golden/test_srcline_against_perf.py): templates and
// lambdas inlined at -O2 into a few noinline functions, names demangled as perf demangles them.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

namespace shapes {

template <typename T> struct Accumulator {
    T total{};
    void add(T value) { total = total * T(3) / T(4) + value; }
};

template <typename T> inline T reduce(const std::vector<T> &values)
{
    Accumulator<T> acc;
    for (const T &v : values)
        acc.add(v);
    return acc.total;
}

template <typename T> __attribute__((noinline)) T sorted_sum(std::vector<T> values)
{
    std::sort(values.begin(), values.end(), [](T a, T b) { return a > b; });
    return reduce(values);
}

}  // namespace shapes

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? std::atoi(argv[1]) : 300;
    std::vector<double> doubles(4096);
    std::vector<long> longs(4096);
    double d = 0;
    long l = 0;
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < doubles.size(); i++) {
            doubles[i] = double((i * 2654435761u + r) % 10007);
            longs[i] = long((i * 40503u + r) % 65521);
        }
        d += shapes::sorted_sum(doubles);
        l += shapes::sorted_sum(longs);
    }
    std::printf("%f %ld\n", d, l);
    return 0;
}
