// Linux calls that Glibc shows Swift only under _GNU_SOURCE: accepting and piping with flags
// (so that no descriptor leaks into a process the agent starts), and reading who wrote the
// bytes of a Unix socket (SCM_CREDENTIALS). Declared with plain types; CHandoffSystem.c
// defines them with the system's headers.
#ifndef C_HANDOFF_SYSTEM_H
#define C_HANDOFF_SYSTEM_H

/// accept4 with SOCK_CLOEXEC and SOCK_NONBLOCK.
int handoff_accept(int listener);

/// A pipe whose ends are close-on-exec and non-blocking.
int handoff_pipe(int ends[2]);

/// One non-blocking recvmsg into `buffer`. `*writer` is the pid the kernel gives for the
/// bytes' writer (SCM_CREDENTIALS; 0 when none came); descriptors sent along (SCM_RIGHTS)
/// are closed. Returns what recvmsg returned.
long handoff_receive(int fd, void *buffer, unsigned long count, int *writer);

/// Asks the kernel to name the writer of every byte this socket (or those it accepts) receives.
int handoff_pass_credentials(int fd);

/// Swaps two paths in one step (renameat2 with RENAME_EXCHANGE): each then names what the
/// other named, and no moment exists where either names nothing.
int handoff_exchange(const char *first, const char *second);

/// getrandom(2): up to `count` bytes from the system's generator into `buffer`. Returns the
/// number written, or -1 with errno set.
long handoff_random(void *buffer, unsigned long count);

/// sched_getcpu(3): the processor the calling thread runs on now, or -1.
int handoff_processor(void);

/// Sends every job the Swift runtime would give its global pool of threads to `target`
/// instead (swift_task_enqueueGlobal_hook). Returns 0 when another hook is already set.
int handoff_take_global_executor(void (*target)(void *job));

/// Starts `path` (an absolute path) with posix_spawn. `streams[i]` is the descriptor the
/// child gets as descriptor i (0, 1, 2), or -1 to keep this process's own. Every other
/// descriptor is closed in the child (closefrom 3), whatever its close-on-exec flag, so no
/// socket or pipe of this process leaks into it. The child starts in `directory` (NULL:
/// this one's), with no signal blocked and the usual signals at their default action, in a
/// process group of its own when `new_group` is not 0. Returns 0 and the pid, or the errno
/// of the failure (exec's own included: ENOENT, EACCES, ETXTBSY).
int handoff_spawn(int *pid, const char *path, char *const argv[], char *const envp[],
                  const char *directory, const int streams[3], int new_group);

/// Blocks until child `pid` has ended, without reaping it (waitid, WNOWAIT). Returns 0 once
/// it has ended, -1 with errno set otherwise (ECHILD: it was reaped already).
int handoff_await_child(int pid);

/// Reaps the ended child `pid` (waitid, WNOHANG). Returns 1 with `*status` (the exit status,
/// or the signal) and `*signaled` set, 0 when it has not ended, -1 on error (ECHILD: reaped).
int handoff_reap(int pid, int *status, int *signaled);

#endif
