/* A shared library whose constructor spins (tests/golden/test_srcline_against_perf.py): ld.so runs
 * it from `call_init`, so every sample taken while it spins has ld.so's call of the library's
 * DT_INIT_ARRAY entries as a caller frame. That call is in code where ld.so's DWARF has call_init
 * inlined into its own out-of-line copy (glibc 2.36, Debian 12: `call_init+0xcd`). SPIN_ROUNDS in
 * the environment sets the rounds (default: about 0.2 s). */
#include <stdlib.h>

volatile unsigned long ld_init_spun;

__attribute__((constructor)) static void spin_at_load(void)
{
    const char *rounds_text = getenv("SPIN_ROUNDS");
    unsigned long rounds = rounds_text ? strtoul(rounds_text, NULL, 10) : 200000000ul;
    for (unsigned long i = 0; i < rounds; i++)
        ld_init_spun += i;
}
