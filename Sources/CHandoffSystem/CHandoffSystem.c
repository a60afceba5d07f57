#define _GNU_SOURCE
#include "CHandoffSystem.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

int handoff_accept(int listener) {
    return accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
}

int handoff_pipe(int ends[2]) {
    return pipe2(ends, O_CLOEXEC | O_NONBLOCK);
}

long handoff_receive(int fd, void *buffer, unsigned long count, int *writer) {
    union {
        struct cmsghdr align;
        char bytes[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof(int) * 16)];
    } control;
    struct iovec vector = { .iov_base = buffer, .iov_len = count };
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control.bytes;
    message.msg_controllen = sizeof(control.bytes);
    *writer = 0;
    long received = recvmsg(fd, &message, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (received < 0) return received;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level != SOL_SOCKET) continue;
        if (header->cmsg_type == SCM_CREDENTIALS && header->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(header), sizeof(credentials));
            *writer = credentials.pid;
        } else if (header->cmsg_type == SCM_RIGHTS) {
            // A client has no descriptors to give the agent: close them, so none leaks.
            unsigned long passed = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (unsigned long i = 0; i < passed; i++) {
                int descriptor;
                memcpy(&descriptor, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
                close(descriptor);
            }
        }
    }
    return received;
}

int handoff_pass_credentials(int fd) {
    int one = 1;
    return setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one));
}

int handoff_exchange(const char *first, const char *second) {
    return renameat2(AT_FDCWD, first, AT_FDCWD, second, RENAME_EXCHANGE);
}

long handoff_random(void *buffer, unsigned long count) {
    return (long)getrandom(buffer, count, 0);
}

int handoff_processor(void) {
    return sched_getcpu();
}

// The Swift runtime's hook for where new tasks' jobs go (swift_task_enqueueGlobal_hook),
// called with Swift's calling convention. Referenced directly rather than looked up with
// dlsym, which cannot find it in an executable linked with the static Swift runtime.
#define HANDOFF_SWIFTCC __attribute__((swiftcall))
typedef HANDOFF_SWIFTCC void (*handoff_original_enqueue)(void *job);
typedef HANDOFF_SWIFTCC void (*handoff_enqueue_hook)(void *job, handoff_original_enqueue original);
extern handoff_enqueue_hook swift_task_enqueueGlobal_hook;

static void (*handoff_enqueue_target)(void *job);

static HANDOFF_SWIFTCC void handoff_enqueue(void *job, handoff_original_enqueue original) {
    (void)original;
    handoff_enqueue_target(job);
}

int handoff_take_global_executor(void (*target)(void *job)) {
    if (__atomic_load_n(&swift_task_enqueueGlobal_hook, __ATOMIC_ACQUIRE) != NULL) return 0;
    handoff_enqueue_target = target;
    handoff_enqueue_hook expected = NULL;
    return __atomic_compare_exchange_n(&swift_task_enqueueGlobal_hook, &expected, handoff_enqueue, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

int handoff_spawn(int *pid, const char *path, char *const argv[], char *const envp[],
                  const char *directory, const int streams[3], int new_group) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int result = posix_spawn_file_actions_init(&actions);
    if (result != 0) return result;
    result = posix_spawnattr_init(&attributes);
    if (result != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return result;
    }
    for (int target = 0; target < 3 && result == 0; target++) {
        if (streams[target] >= 0) result = posix_spawn_file_actions_adddup2(&actions, streams[target], target);
    }
    if (result == 0 && directory != NULL) result = posix_spawn_file_actions_addchdir_np(&actions, directory);
    if (result == 0) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    int reset[] = { SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2 };
    for (unsigned long index = 0; index < sizeof(reset) / sizeof(reset[0]); index++) sigaddset(&defaults, reset[index]);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | (new_group ? POSIX_SPAWN_SETPGROUP : 0);
    if (result == 0) result = posix_spawnattr_setflags(&attributes, flags);
    if (result == 0) result = posix_spawnattr_setsigmask(&attributes, &none);
    if (result == 0) result = posix_spawnattr_setsigdefault(&attributes, &defaults);
    if (result == 0) result = posix_spawnattr_setpgroup(&attributes, 0);
    if (result == 0) {
        pid_t child = 0;
        result = posix_spawn(&child, path, &actions, &attributes, argv, envp);
        if (result == 0) *pid = child;
    }
    posix_spawnattr_destroy(&attributes);
    posix_spawn_file_actions_destroy(&actions);
    return result;
}

int handoff_await_child(int pid) {
    siginfo_t info;
    for (;;) {
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

int handoff_reap(int pid, int *status, int *signaled) {
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    for (;;) {
        if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG) == 0) break;
        if (errno != EINTR) return -1;
    }
    if (info.si_pid == 0) return 0;
    *status = info.si_status;
    *signaled = info.si_code == CLD_EXITED ? 0 : 1;
    return 1;
}
