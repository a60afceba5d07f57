#define _GNU_SOURCE
#include "CHandoffSystem.h"

#include <fcntl.h>
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
