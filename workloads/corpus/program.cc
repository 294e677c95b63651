// The corpus's C++ program, through libstdc++: std::sort calling back a lambda, std::map, virtual
// calls, std::string.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

static volatile unsigned long sink;

namespace corpus {

__attribute__((noinline)) unsigned long leaf(unsigned long n)
{
    unsigned long s = 0;
    for (unsigned long i = 0; i < n; i++)
        s += i * i ^ (s >> 3);
    return s;
}

struct Shape {
    virtual ~Shape() = default;
    virtual unsigned long work(int depth) const = 0;
};

struct Tower : Shape {
    __attribute__((noinline)) unsigned long work(int depth) const override
    {
        return depth == 0 ? leaf(2000) : work(depth - 1) + static_cast<unsigned long>(depth);
    }
};

}  // namespace corpus

int main(int argc, char **argv)
{
    using clock = std::chrono::steady_clock;
    double seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
    auto end = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
    std::unique_ptr<corpus::Shape> shape = std::make_unique<corpus::Tower>();
    std::map<std::string, unsigned long> counts;
    while (clock::now() < end) {
        sink += shape->work(6);
        std::vector<int> numbers(256);
        for (int i = 0; i < 256; i++)
            numbers[i] = (i * 7919) % 256;
        std::sort(numbers.begin(), numbers.end(), [](int a, int b) {
            sink += corpus::leaf(50);
            return a < b;
        });
        counts["key" + std::to_string(sink % 64)] += 1;
    }
    std::printf("%lu %zu\n", static_cast<unsigned long>(sink), counts.size());
    return 0;
}
