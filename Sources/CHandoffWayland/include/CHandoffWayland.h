// The Wayland clipboard, through the system's libwayland-client loaded at run time (dlopen) and
// a data-control protocol: ext-data-control-v1 where the compositor has it, else
// wlr-data-control-unstable-v1 (sway and other wlroots compositors, KDE Plasma). Nothing of
// Wayland is needed to build Handoff. One thread uses a display at a time.
#ifndef CHANDOFF_WAYLAND_H
#define CHANDOFF_WAYLAND_H

#include <stddef.h>
#include <stdint.h>

typedef struct hw_display hw_display;

/// What happened on the display.
enum hw_event_kind {
    /// An app copied: the clipboard holds its offer now (hw_offer_type lists its types; hw_read
    /// reads them). Earlier selection events still queued are dropped: only the newest counts.
    HW_EVENT_SELECTION = 1,
    /// The clipboard is empty now.
    HW_EVENT_CLEARED = 2,
    /// An app pastes what this client holds, as `type`: write it to `fd`, then close `fd`.
    HW_EVENT_SEND = 3,
    /// What this client held is no longer the clipboard (an app copied since).
    HW_EVENT_CANCELLED = 4,
    /// The compositor took the clipboard away from this client (its seat went away).
    HW_EVENT_FINISHED = 5,
};

typedef struct hw_event {
    int kind;
    /// HW_EVENT_SEND: the pipe to write to (the caller closes it).
    int fd;
    /// HW_EVENT_SEND: the type asked for (NUL-terminated; hw_event_clear frees it).
    char *type;
} hw_event;

/// Connects to `name` (NULL: $WAYLAND_DISPLAY) and its clipboard; NULL with the reason in `error`
/// when libwayland-client or the display is not there, or the compositor offers no data-control
/// protocol (GNOME).
hw_display *hw_open(const char *name, char *error, size_t error_size);
void hw_close(hw_display *display);
/// The data-control protocol in use: "ext_data_control_manager_v1" or "zwlr_data_control_manager_v1".
const char *hw_protocol(hw_display *display);
/// The connection's file descriptor, to wait on.
int hw_fd(hw_display *display);
/// The next event, waiting up to `timeout_ms` (0: only what is there): 1 with `event` set (free
/// it with hw_event_clear), 0 none, -1 the connection failed.
int hw_next_event(hw_display *display, hw_event *event, int timeout_ms);
void hw_event_clear(hw_event *event);

/// The types of the clipboard's current offer (an app's copy), `index` from 0; NULL past the end.
const char *hw_offer_type(hw_display *display, int index);
/// Reads the current offer as `type`, waiting up to `timeout_ms` in all; at most `limit` bytes.
/// 0 with `*bytes` (malloc'd, the caller frees) and `*length` set; 1 there is no offer; 2 timed
/// out; 3 over the limit; -1 failed.
int hw_read(hw_display *display, const char *type, uint8_t **bytes, size_t *length, int timeout_ms, size_t limit);

/// Makes this client the clipboard's source, offering `types`; 0 when it is. `mark`: offer a
/// marker type besides, by which this client knows its own copy when the compositor hands it
/// back (a clipboard service does; an app that copies does not).
int hw_own(hw_display *display, const char *const *types, int count, int mark);
/// Empties the clipboard if this client is still its source.
void hw_disown(hw_display *display);

#endif
