// waiting_threads: C++ threads blocked in std::condition_variable::wait (libstdc++ and libc frames
// between ours) and one in a std::sort comparator; prints "ready" once all are. For the live
// backtrace's oracles (tests/integration/test_backtrace_live.py).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

static std::mutex mutex;
static std::condition_variable never;
static std::atomic<int> ready{0};

[[gnu::noinline]] static void wait_forever()
{
    std::unique_lock<std::mutex> lock(mutex);
    ready++;
    never.wait(lock, [] { return false; });
}

int main()
{
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; i++)
        threads.emplace_back(wait_forever);
    threads.emplace_back([] {
        std::vector<int> values{5, 3, 7, 1, 8, 2, 6, 4};
        std::sort(values.begin(), values.end(), [](int a, int b) {
            wait_forever();
            return a < b;
        });
    });
    while (ready < 4)
        std::this_thread::yield();
    std::puts("ready");
    std::fflush(stdout);
    for (auto &thread : threads)
        thread.join();
}
