// The X11 clipboard, through the system's libxcb and its XFixes extension, loaded at run time
// (dlopen): nothing of X11 is needed to build Handoff, and a machine without it says so when the
// clipboard service starts. One thread uses a display at a time.
#ifndef CHANDOFF_X11_H
#define CHANDOFF_X11_H

#include <stddef.h>
#include <stdint.h>

typedef struct hx_display hx_display;

/// What happened on the display.
enum hx_event_kind {
    /// Another client owns the CLIPBOARD selection now (an app copied): `owner`, since `time`.
    HX_EVENT_OWNER_CHANGED = 1,
    /// The CLIPBOARD has no owner now (its owner closed, or gave it up).
    HX_EVENT_OWNER_GONE = 2,
    /// A client asks for our CLIPBOARD as `target`, into `property` of `requestor`: answer it
    /// with hx_answer, hx_answer_targets or hx_refuse.
    HX_EVENT_REQUEST = 3,
    /// We no longer own the CLIPBOARD.
    HX_EVENT_LOST = 4,
};

typedef struct hx_event {
    int kind;
    uint32_t owner;
    uint32_t requestor;
    uint32_t target;
    uint32_t property;
    uint32_t time;
} hx_event;

/// Opens `name` (NULL: $DISPLAY), makes an invisible window and watches the CLIPBOARD; NULL
/// with the reason in `error` when libxcb, XFixes or the display is not there.
hx_display *hx_open(const char *name, char *error, size_t error_size);
void hx_close(hx_display *display);
/// The connection's file descriptor, to wait on.
int hx_fd(hx_display *display);
/// The next event, waiting up to `timeout_ms` (0: only what is there): 1 with `event` set, 0
/// none, -1 the connection failed.
int hx_next_event(hx_display *display, hx_event *event, int timeout_ms);

/// An atom's name, into `name` (NUL-terminated); 0 on success.
int hx_atom_name(hx_display *display, uint32_t atom, char *name, size_t size);
/// The atom named `name`, made if needed; 0 on failure.
uint32_t hx_atom(hx_display *display, const char *name);

/// Reads the CLIPBOARD as `target` from its owner (INCR transfers included), naming `time`
/// (the owner's: HX_EVENT_OWNER_CHANGED's), waiting up to `timeout_ms` in all; at most `limit`
/// bytes. Only the answer to this very request is taken. 0 with `*bytes` (malloc'd, the caller frees)
/// and `*length` set; 1 the owner refused or there is none; 2 timed out; 3 over the limit;
/// -1 the connection failed. `*type` is the type the owner answered with.
int hx_read(hx_display *display, uint32_t target, uint32_t time, uint8_t **bytes, size_t *length, uint32_t *type, int timeout_ms, size_t limit);

/// Makes this client the CLIPBOARD's owner; 0 when it is.
int hx_own(hx_display *display);
/// Gives up the CLIPBOARD if this client still owns it.
void hx_disown(hx_display *display);
/// Answers a request with `length` bytes of `type` (INCR when large, waiting up to
/// `timeout_ms` for the requestor to take each part); 0 when answered.
int hx_answer(hx_display *display, const hx_event *request, uint32_t type, const uint8_t *bytes, size_t length, int timeout_ms);
/// Answers a TARGETS request with `atoms`.
int hx_answer_atoms(hx_display *display, const hx_event *request, const uint32_t *atoms, int count);
/// Refuses a request.
void hx_refuse(hx_display *display, const hx_event *request);

#endif
