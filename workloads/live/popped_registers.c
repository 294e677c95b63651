/* popped_registers: a thread held in a function's epilogue after it popped the registers it saved,
 * where the function's CFI, written as clang writes epilogues (no .cfi_restore after a pop), still
 * names their slots, now in the red zone below rsp. A live snapshot reads the caller's rbx and r12
 * there, as libunwind and gdb read them from the process (tests/golden/test_against_libunwind.py).
 * Prints "ready" once the thread spins there; runs until killed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static atomic_int spinning;

/* Saves rbx and r12, uses them, restores them, then sets *flag and spins where the pops left the
 * rows rbx = [CFA-16], r12 = [CFA-24] with CFA = rsp+8: both slots below rsp. */
void popped_spin(atomic_int *flag);
__asm__(".text\n"
        ".globl popped_spin\n"
        ".type popped_spin, @function\n"
        "popped_spin:\n"
        ".cfi_startproc\n"
        "    pushq %rbx\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbx, -16\n"
        "    pushq %r12\n"
        ".cfi_def_cfa_offset 24\n"
        ".cfi_offset %r12, -24\n"
        "    movq %rdi, %rbx\n"
        "    xorl %r12d, %r12d\n"
        "    popq %r12\n"
        ".cfi_def_cfa_offset 16\n"
        "    popq %rbx\n"
        ".cfi_def_cfa_offset 8\n"
        "    movl $1, (%rdi)\n"
        "1:  pause\n"
        "    jmp 1b\n"
        ".cfi_endproc\n"
        ".size popped_spin, .-popped_spin\n");

static void *spin_thread(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "popped");
    popped_spin(&spinning);
    return NULL;
}

int main(void)
{
    pthread_t thread;
    pthread_create(&thread, NULL, spin_thread, NULL);
    while (!atomic_load(&spinning))
        usleep(1000);
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
