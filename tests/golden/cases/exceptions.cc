// C++ exceptions: g++ -O2 gives "zPLR" CIEs (personality __gxx_personality_v0 through
// DW.ref, encoding 0x9b), FDEs with LSDA pointers into .gcc_except_table, DW_CFA_GNU_args_size
// is not used on x86-64 with -O2 but cleanups and catch blocks add remember/restore states.
#include <stdexcept>
#include <string>
#include <vector>

struct Guard {
    std::vector<int> *log;
    ~Guard() { log->push_back(-1); }
};

int thrower(int n)
{
    if (n > 3)
        throw std::runtime_error("too big: " + std::to_string(n));
    return n * 2;
}

int catcher(std::vector<int> &log, int n)
{
    Guard guard{&log};
    try {
        return thrower(n);
    } catch (const std::runtime_error &error) {
        log.push_back(static_cast<int>(std::string(error.what()).size()));
        return -1;
    }
}
