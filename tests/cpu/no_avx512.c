/* LD_PRELOAD shim: this process (and its children) see a CPU without AVX-512 or VNNI.
 * CPUID faulting (arch_prctl ARCH_SET_CPUID, Linux >= 4.12, cpuid_fault in /proc/cpuinfo) turns
 * every CPUID into a SIGSEGV; the handler runs the real CPUID and clears the AVX-512 and VNNI
 * feature bits, so libraries that dispatch on CPUID (numpy, onnxruntime's MLAS, oneDNN, torch)
 * pick their AVX2 kernels. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_SET_CPUID 0x1012

static long set_cpuid(unsigned long enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void on_segv(int sig, siginfo_t *info, void *context) {
    (void)sig; (void)info;
    greg_t *reg = ((ucontext_t *)context)->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)reg[REG_RIP];
    if (ip[0] != 0x0f || ip[1] != 0xa2) {  /* a real fault: let it crash as it would */
        signal(SIGSEGV, SIG_DFL);
        return;
    }
    uint32_t leaf = (uint32_t)reg[REG_RAX], sub = (uint32_t)reg[REG_RCX], a, b, c, d;
    set_cpuid(1);
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(leaf), "c"(sub));
    set_cpuid(0);
    if (leaf == 7 && sub == 0) {
        /* EBX: avx512 f, dq, ifma, pf, er, cd, bw, vl */
        b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
               (1u << 30) | (1u << 31));
        /* ECX: vbmi, vbmi2, vnni, bitalg, vpopcntdq */
        c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        /* EDX: 4vnniw, 4fmaps, vp2intersect, fp16, amx */
        d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
    } else if (leaf == 7 && sub == 1) {
        a &= ~((1u << 4) | (1u << 5)); /* avx_vnni, avx512_bf16 */
    }
    reg[REG_RAX] = a; reg[REG_RBX] = b; reg[REG_RCX] = c; reg[REG_RDX] = d;
    reg[REG_RIP] += 2;
}

__attribute__((constructor)) static void mask_avx512(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &action, NULL);
    if (set_cpuid(0) != 0) perror("no_avx512: CPUID faulting unavailable");
}
