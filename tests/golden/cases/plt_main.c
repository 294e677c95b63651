/* A linked, dynamically linked executable: its .plt (and with -z ibtplt also .plt.sec) gets an
 * FDE whose CFA is the PLT expression DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and;
 * DW_OP_lit11; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus (the push in the PLT's second half
 * moves rsp by 8). The crt files add their own CIEs and FDEs (_start marks rip undefined). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int main(int argc, char **argv)
{
    qsort(argv, (size_t)argc, sizeof *argv, compare);
    for (int i = 0; i < argc; i++)
        printf("%s %zu\n", argv[i], strlen(argv[i]));
    puts(getenv("HOME") ? "home" : "no home");
    return 0;
}
