// The corpus's C++ program, through libstdc++: std::sort calling back a lambda, std::map, virtual
// calls, std::string.
#include <algorithm>
#include <ctime>
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
    // CPU time (std::clock), so that a loaded machine records as many cpu-clock samples
    double seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
    std::clock_t end = std::clock() + static_cast<std::clock_t>(seconds * CLOCKS_PER_SEC);
    std::unique_ptr<corpus::Shape> shape = std::make_unique<corpus::Tower>();
    std::map<std::string, unsigned long> counts;
    while (std::clock() < end) {
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
