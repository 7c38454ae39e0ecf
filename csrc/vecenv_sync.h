/*
 * vecenv_sync.h: atomics, clocks and the futex wait/wake used between the
 * parent process and its workers. Included by _core.pyx; every function here
 * is callable without the GIL.
 *
 * Protocol words live in a MAP_SHARED mapping, so the futex calls use the
 * shared (not FUTEX_PRIVATE) variants.  A waiter announces itself by setting a
 * "sleeping" word before it re-checks the condition and sleeps; a waker changes
 * the condition word first and only then reads the sleeping word, both with
 * sequentially consistent atomics, so at least one of them sees the other and
 * no wake is lost, while a waker that finds nobody asleep skips the syscall.
 */
#ifndef VECENV_SYNC_H
#define VECENV_SYNC_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static inline uint32_t ve_load(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
static inline void ve_store(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t ve_add(uint32_t *p, uint32_t v) { return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }
static inline uint32_t ve_sub(uint32_t *p, uint32_t v) { return __atomic_sub_fetch(p, v, __ATOMIC_SEQ_CST); }
static inline void ve_fence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

static inline void ve_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* One step of a bounded spin: pause for the first iterations, then yield the
 * CPU each time, so a spinner never keeps a runnable process of the same core
 * waiting (spinners may outnumber cores) while its own core stays awake and
 * answers a wake within microseconds instead of waiting out an idle halt. */
static inline void ve_spin_step(unsigned long iter) {
    if (iter < 64) {
        ve_cpu_relax();
    } else {
        sched_yield();
    }
}

/* CLOCK_MONOTONIC in integer nanoseconds (the workers' busy time, stats()). */
static inline uint64_t ve_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline double ve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sleep while *addr == expected, at most timeout_s seconds (> 0).
 * Returns 0 when woken or when the value already differed, 1 on timeout.
 * Spurious wake-ups return 0; callers always re-check their condition. */
static inline int ve_futex_wait(uint32_t *addr, uint32_t expected, double timeout_s) {
    if (timeout_s <= 0.0) return 1;
#ifdef __linux__
    struct timespec ts;
    ts.tv_sec = (time_t)timeout_s;
    ts.tv_nsec = (long)((timeout_s - (double)ts.tv_sec) * 1e9);
    long r = syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, NULL, 0);
    if (r == -1 && errno == ETIMEDOUT) return 1;
    return 0;
#else
    /* No futex: poll with short sleeps (50 us), bounded by the timeout. */
    double slice = timeout_s < 50e-6 ? timeout_s : 50e-6;
    struct timespec ts;
    ts.tv_sec = 0;
    ts.tv_nsec = (long)(slice * 1e9);
    nanosleep(&ts, NULL);
    return __atomic_load_n(addr, __ATOMIC_SEQ_CST) == expected && slice >= timeout_s;
#endif
}

static inline void ve_futex_wake(uint32_t *addr) {
#ifdef __linux__
    syscall(SYS_futex, addr, FUTEX_WAKE, 1, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

#endif /* VECENV_SYNC_H */
