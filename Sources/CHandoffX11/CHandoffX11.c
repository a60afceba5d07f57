// The X11 clipboard through libxcb and libxcb-xfixes, loaded with dlopen. The declarations
// below are the libraries' ABI as their headers give it (xcb.h, xproto.h, xfixes.h): only what
// the clipboard uses. ICCCM section 2 is the protocol: TARGETS, INCR, SelectionNotify.
#define _GNU_SOURCE
#include "CHandoffX11.h"

#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct xcb_connection_t xcb_connection_t;
typedef struct { unsigned int sequence; } xcb_cookie_t;
typedef struct {
    uint8_t response_type;
    uint8_t pad0;
    uint16_t sequence;
    uint32_t pad[7];
    uint32_t full_sequence;
} xcb_generic_event_t;
typedef struct {
    uint8_t response_type, error_code;
    uint16_t sequence;
    uint32_t resource_id;
    uint16_t minor_code;
    uint8_t major_code, pad0;
    uint32_t pad[5];
    uint32_t full_sequence;
} xcb_generic_error_t;
typedef struct {
    uint8_t status, pad0;
    uint16_t protocol_major_version, protocol_minor_version, length;
    uint32_t release_number, resource_id_base, resource_id_mask, motion_buffer_size;
    uint16_t vendor_len, maximum_request_length;
    uint8_t roots_len, pixmap_formats_len, image_byte_order, bitmap_format_bit_order, bitmap_format_scanline_unit,
        bitmap_format_scanline_pad, min_keycode, max_keycode, pad1[4];
} xcb_setup_t;
typedef struct {
    uint32_t root, default_colormap, white_pixel, black_pixel, current_input_masks;
    uint16_t width_in_pixels, height_in_pixels, width_in_millimeters, height_in_millimeters, min_installed_maps, max_installed_maps;
    uint32_t root_visual;
    uint8_t backing_stores, save_unders, root_depth, allowed_depths_len;
} xcb_screen_t;
typedef struct {
    xcb_screen_t *data;
    int rem;
    int index;
} xcb_screen_iterator_t;
typedef struct {
    uint8_t response_type, pad0;
    uint16_t sequence;
    uint32_t length, atom;
} xcb_intern_atom_reply_t;
typedef struct {
    uint8_t response_type, pad0;
    uint16_t sequence;
    uint32_t length;
    uint16_t name_len;
    uint8_t pad1[22];
} xcb_get_atom_name_reply_t;
typedef struct {
    uint8_t response_type, format;
    uint16_t sequence;
    uint32_t length, type, bytes_after, value_len;
    uint8_t pad0[12];
} xcb_get_property_reply_t;
typedef struct {
    uint8_t response_type, pad0;
    uint16_t sequence;
    uint32_t length, owner;
} xcb_get_selection_owner_reply_t;
typedef struct {
    uint8_t response_type, pad0;
    uint16_t sequence;
    uint32_t length;
    uint8_t present, major_opcode, first_event, first_error;
} xcb_query_extension_reply_t;
typedef struct xcb_extension_t xcb_extension_t;
typedef struct {
    uint8_t response_type, pad0;
    uint16_t sequence;
    uint32_t length, major_version, minor_version;
    uint8_t pad1[16];
} xcb_xfixes_query_version_reply_t;

enum {
    SELECTION_REQUEST = 30,
    SELECTION_CLEAR = 29,
    SELECTION_NOTIFY = 31,
    PROPERTY_NOTIFY = 28,
    PROPERTY_NEW_VALUE = 0,
    PROPERTY_DELETE = 1,
    EVENT_MASK_PROPERTY_CHANGE = 1 << 22,
    CW_EVENT_MASK = 2048,
    WINDOW_CLASS_INPUT_ONLY = 2,
    PROP_MODE_REPLACE = 0,
    PROP_MODE_APPEND = 2,
    ATOM_ATOM = 4,
    ATOM_INTEGER = 19,
    XFIXES_SET_SELECTION_OWNER = 1,
    XFIXES_SELECTION_WINDOW_DESTROY = 2,
    XFIXES_SELECTION_CLIENT_CLOSE = 4,
};

static struct {
    int loaded;
    xcb_connection_t *(*connect)(const char *, int *);
    int (*connection_has_error)(xcb_connection_t *);
    void (*disconnect)(xcb_connection_t *);
    const xcb_setup_t *(*get_setup)(xcb_connection_t *);
    xcb_screen_iterator_t (*setup_roots_iterator)(const xcb_setup_t *);
    void (*screen_next)(xcb_screen_iterator_t *);
    uint32_t (*generate_id)(xcb_connection_t *);
    xcb_cookie_t (*create_window)(xcb_connection_t *, uint8_t, uint32_t, uint32_t, int16_t, int16_t, uint16_t, uint16_t, uint16_t, uint16_t, uint32_t, uint32_t, const void *);
    xcb_cookie_t (*intern_atom)(xcb_connection_t *, uint8_t, uint16_t, const char *);
    xcb_intern_atom_reply_t *(*intern_atom_reply)(xcb_connection_t *, xcb_cookie_t, xcb_generic_error_t **);
    xcb_cookie_t (*get_atom_name)(xcb_connection_t *, uint32_t);
    xcb_get_atom_name_reply_t *(*get_atom_name_reply)(xcb_connection_t *, xcb_cookie_t, xcb_generic_error_t **);
    char *(*get_atom_name_name)(const xcb_get_atom_name_reply_t *);
    xcb_cookie_t (*convert_selection)(xcb_connection_t *, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t);
    xcb_cookie_t (*get_property)(xcb_connection_t *, uint8_t, uint32_t, uint32_t, uint32_t, uint32_t, uint32_t);
    xcb_get_property_reply_t *(*get_property_reply)(xcb_connection_t *, xcb_cookie_t, xcb_generic_error_t **);
    void *(*get_property_value)(const xcb_get_property_reply_t *);
    int (*get_property_value_length)(const xcb_get_property_reply_t *);
    xcb_cookie_t (*delete_property)(xcb_connection_t *, uint32_t, uint32_t);
    xcb_cookie_t (*change_property)(xcb_connection_t *, uint8_t, uint32_t, uint32_t, uint32_t, uint8_t, uint32_t, const void *);
    xcb_cookie_t (*set_selection_owner)(xcb_connection_t *, uint32_t, uint32_t, uint32_t);
    xcb_cookie_t (*get_selection_owner)(xcb_connection_t *, uint32_t);
    xcb_get_selection_owner_reply_t *(*get_selection_owner_reply)(xcb_connection_t *, xcb_cookie_t, xcb_generic_error_t **);
    xcb_cookie_t (*send_event)(xcb_connection_t *, uint8_t, uint32_t, uint32_t, const char *);
    xcb_cookie_t (*change_window_attributes)(xcb_connection_t *, uint32_t, uint32_t, const void *);
    int (*flush)(xcb_connection_t *);
    xcb_generic_event_t *(*poll_for_event)(xcb_connection_t *);
    int (*get_file_descriptor)(xcb_connection_t *);
    uint32_t (*get_maximum_request_length)(xcb_connection_t *);
    const xcb_query_extension_reply_t *(*get_extension_data)(xcb_connection_t *, xcb_extension_t *);
    xcb_extension_t *xfixes_id;
    xcb_cookie_t (*xfixes_query_version)(xcb_connection_t *, uint32_t, uint32_t);
    xcb_xfixes_query_version_reply_t *(*xfixes_query_version_reply)(xcb_connection_t *, xcb_cookie_t, xcb_generic_error_t **);
    xcb_cookie_t (*xfixes_select_selection_input)(xcb_connection_t *, uint32_t, uint32_t, uint32_t);
} xcb;

struct hx_display {
    xcb_connection_t *connection;
    uint32_t window;
    uint32_t clipboard, targets, incr, timestamp;
    /// The properties reads land in, one after the other: an owner's late answer to an earlier
    /// read writes one this read does not look at.
    uint32_t properties[4];
    unsigned next_property;
    uint8_t xfixes_event;
    int owning;
    uint32_t owned_at;
    size_t chunk;
    /// Events read while waiting for another, handed out by hx_next_event first.
    xcb_generic_event_t **queue;
    size_t queued, capacity;
};

static int load(char *error, size_t size) {
    if (xcb.loaded) return 0;
    void *core = dlopen("libxcb.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!core) {
        snprintf(error, size, "libxcb is not installed (%s): install libxcb1", dlerror());
        return -1;
    }
    void *xfixes = dlopen("libxcb-xfixes.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!xfixes) {
        snprintf(error, size, "libxcb-xfixes is not installed (%s): install libxcb-xfixes0", dlerror());
        return -1;
    }
#define FIND(lib, field, name)                                                              \
    do {                                                                                    \
        *(void **)(&xcb.field) = dlsym(lib, name);                                          \
        if (!xcb.field) {                                                                   \
            snprintf(error, size, "%s has no %s: it is too old", #lib, name);               \
            return -1;                                                                      \
        }                                                                                   \
    } while (0)
    FIND(core, connect, "xcb_connect");
    FIND(core, connection_has_error, "xcb_connection_has_error");
    FIND(core, disconnect, "xcb_disconnect");
    FIND(core, get_setup, "xcb_get_setup");
    FIND(core, setup_roots_iterator, "xcb_setup_roots_iterator");
    FIND(core, screen_next, "xcb_screen_next");
    FIND(core, generate_id, "xcb_generate_id");
    FIND(core, create_window, "xcb_create_window");
    FIND(core, intern_atom, "xcb_intern_atom");
    FIND(core, intern_atom_reply, "xcb_intern_atom_reply");
    FIND(core, get_atom_name, "xcb_get_atom_name");
    FIND(core, get_atom_name_reply, "xcb_get_atom_name_reply");
    FIND(core, get_atom_name_name, "xcb_get_atom_name_name");
    FIND(core, convert_selection, "xcb_convert_selection");
    FIND(core, get_property, "xcb_get_property");
    FIND(core, get_property_reply, "xcb_get_property_reply");
    FIND(core, get_property_value, "xcb_get_property_value");
    FIND(core, get_property_value_length, "xcb_get_property_value_length");
    FIND(core, delete_property, "xcb_delete_property");
    FIND(core, change_property, "xcb_change_property");
    FIND(core, set_selection_owner, "xcb_set_selection_owner");
    FIND(core, get_selection_owner, "xcb_get_selection_owner");
    FIND(core, get_selection_owner_reply, "xcb_get_selection_owner_reply");
    FIND(core, send_event, "xcb_send_event");
    FIND(core, change_window_attributes, "xcb_change_window_attributes");
    FIND(core, flush, "xcb_flush");
    FIND(core, poll_for_event, "xcb_poll_for_event");
    FIND(core, get_file_descriptor, "xcb_get_file_descriptor");
    FIND(core, get_maximum_request_length, "xcb_get_maximum_request_length");
    FIND(core, get_extension_data, "xcb_get_extension_data");
    FIND(xfixes, xfixes_id, "xcb_xfixes_id");
    FIND(xfixes, xfixes_query_version, "xcb_xfixes_query_version");
    FIND(xfixes, xfixes_query_version_reply, "xcb_xfixes_query_version_reply");
    FIND(xfixes, xfixes_select_selection_input, "xcb_xfixes_select_selection_input");
#undef FIND
    xcb.loaded = 1;
    return 0;
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint32_t hx_atom(hx_display *d, const char *name) {
    xcb_intern_atom_reply_t *reply = xcb.intern_atom_reply(d->connection, xcb.intern_atom(d->connection, 0, (uint16_t)strlen(name), name), NULL);
    if (!reply) return 0;
    uint32_t atom = reply->atom;
    free(reply);
    return atom;
}

int hx_atom_name(hx_display *d, uint32_t atom, char *name, size_t size) {
    xcb_get_atom_name_reply_t *reply = xcb.get_atom_name_reply(d->connection, xcb.get_atom_name(d->connection, atom), NULL);
    if (!reply || size == 0) {
        free(reply);
        return -1;
    }
    size_t length = reply->name_len < size - 1 ? reply->name_len : size - 1;
    memcpy(name, xcb.get_atom_name_name(reply), length);
    name[length] = 0;
    free(reply);
    return 0;
}

hx_display *hx_open(const char *name, char *error, size_t error_size) {
    if (load(error, error_size) != 0) return NULL;
    int screen_number = 0;
    xcb_connection_t *connection = xcb.connect(name, &screen_number);
    if (!connection || xcb.connection_has_error(connection)) {
        snprintf(error, error_size, "cannot open the X display '%s'", name ? name : (getenv("DISPLAY") ? getenv("DISPLAY") : "(DISPLAY is not set)"));
        if (connection) xcb.disconnect(connection);
        return NULL;
    }
    const xcb_query_extension_reply_t *extension = xcb.get_extension_data(connection, xcb.xfixes_id);
    if (!extension || !extension->present) {
        snprintf(error, error_size, "the X server has no XFixes extension, which tells clients when the clipboard changes");
        xcb.disconnect(connection);
        return NULL;
    }
    free(xcb.xfixes_query_version_reply(connection, xcb.xfixes_query_version(connection, 5, 0), NULL));
    xcb_screen_iterator_t screens = xcb.setup_roots_iterator(xcb.get_setup(connection));
    for (int i = 0; i < screen_number && screens.rem > 0; i++) xcb.screen_next(&screens);
    if (!screens.data) {
        snprintf(error, error_size, "the X display has no screen %d", screen_number);
        xcb.disconnect(connection);
        return NULL;
    }
    hx_display *d = calloc(1, sizeof *d);
    d->connection = connection;
    d->xfixes_event = extension->first_event;
    d->window = xcb.generate_id(connection);
    uint32_t mask = EVENT_MASK_PROPERTY_CHANGE;
    xcb.create_window(connection, 0, d->window, screens.data->root, -10, -10, 1, 1, 0, WINDOW_CLASS_INPUT_ONLY, 0, CW_EVENT_MASK, &mask);
    d->clipboard = hx_atom(d, "CLIPBOARD");
    d->targets = hx_atom(d, "TARGETS");
    d->incr = hx_atom(d, "INCR");
    d->timestamp = hx_atom(d, "TIMESTAMP");
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "HANDOFF_CLIPBOARD_%d", i);
        d->properties[i] = hx_atom(d, name);
    }
    xcb.xfixes_select_selection_input(
        connection, d->window, d->clipboard, XFIXES_SET_SELECTION_OWNER | XFIXES_SELECTION_WINDOW_DESTROY | XFIXES_SELECTION_CLIENT_CLOSE);
    // A part of an INCR transfer: well inside the largest request the server takes.
    size_t largest = (size_t)xcb.get_maximum_request_length(connection) * 4;
    d->chunk = largest > 4096 ? (largest - 1024 < 256 * 1024 ? largest - 1024 : 256 * 1024) : 4096;
    xcb.flush(connection);
    return d;
}

void hx_close(hx_display *d) {
    if (!d) return;
    for (size_t i = 0; i < d->queued; i++) free(d->queue[i]);
    free(d->queue);
    xcb.disconnect(d->connection);
    free(d);
}

int hx_fd(hx_display *d) { return xcb.get_file_descriptor(d->connection); }

static void enqueue(hx_display *d, xcb_generic_event_t *event) {
    if (d->queued == d->capacity) {
        d->capacity = d->capacity ? d->capacity * 2 : 16;
        d->queue = realloc(d->queue, d->capacity * sizeof *d->queue);
    }
    d->queue[d->queued++] = event;
}

/// The next event from the connection (not the queue), waiting until `deadline` (ms, monotonic);
/// NULL on timeout or failure (`*failed` set).
static xcb_generic_event_t *wait_event(hx_display *d, long long deadline, int *failed) {
    *failed = 0;
    for (;;) {
        xcb_generic_event_t *event = xcb.poll_for_event(d->connection);
        if (event) return event;
        if (xcb.connection_has_error(d->connection)) {
            *failed = 1;
            return NULL;
        }
        long long left = deadline - now_ms();
        if (left <= 0) return NULL;
        struct pollfd fd = {.fd = xcb.get_file_descriptor(d->connection), .events = POLLIN};
        if (poll(&fd, 1, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR) {
            *failed = 1;
            return NULL;
        }
    }
}

/// Turns a raw event into ours; 0 when it is none of ours.
static int translate(hx_display *d, const xcb_generic_event_t *raw, hx_event *out) {
    const uint8_t *bytes = (const uint8_t *)raw;
    uint8_t type = raw->response_type & 0x7F;
    memset(out, 0, sizeof *out);
    if (type == d->xfixes_event) {
        uint32_t owner, selection;
        memcpy(&owner, bytes + 8, 4);
        memcpy(&selection, bytes + 12, 4);
        // The time the owner took the selection: reads name it, and only its answers match.
        memcpy(&out->time, bytes + 20, 4);
        if (selection != d->clipboard || owner == d->window) return 0;
        out->owner = owner;
        out->kind = owner == 0 ? HX_EVENT_OWNER_GONE : HX_EVENT_OWNER_CHANGED;
        return 1;
    }
    if (type == SELECTION_REQUEST) {
        uint32_t selection;
        memcpy(&out->time, bytes + 4, 4);
        memcpy(&out->owner, bytes + 8, 4);
        memcpy(&out->requestor, bytes + 12, 4);
        memcpy(&selection, bytes + 16, 4);
        memcpy(&out->target, bytes + 20, 4);
        memcpy(&out->property, bytes + 24, 4);
        if (selection != d->clipboard) {
            out->kind = HX_EVENT_REQUEST;
            hx_refuse(d, out);
            return 0;
        }
        out->kind = HX_EVENT_REQUEST;
        return 1;
    }
    if (type == SELECTION_CLEAR) {
        uint32_t selection;
        memcpy(&selection, bytes + 12, 4);
        if (selection != d->clipboard) return 0;
        d->owning = 0;
        out->kind = HX_EVENT_LOST;
        return 1;
    }
    return 0;
}

int hx_next_event(hx_display *d, hx_event *event, int timeout_ms) {
    while (d->queued > 0) {
        xcb_generic_event_t *raw = d->queue[0];
        memmove(d->queue, d->queue + 1, (d->queued - 1) * sizeof *d->queue);
        d->queued--;
        int mine = translate(d, raw, event);
        free(raw);
        if (mine) return 1;
    }
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        int failed = 0;
        xcb_generic_event_t *raw = wait_event(d, deadline, &failed);
        if (!raw) return failed ? -1 : 0;
        int mine = translate(d, raw, event);
        free(raw);
        xcb.flush(d->connection);
        if (mine) return 1;
    }
}

/// Waits for an event `matches` accepts, queueing the others; NULL on timeout or failure.
static xcb_generic_event_t *wait_for(hx_display *d, long long deadline, int (*matches)(hx_display *, const xcb_generic_event_t *, const void *), const void *context, int *failed) {
    for (;;) {
        xcb_generic_event_t *raw = wait_event(d, deadline, failed);
        if (!raw) return NULL;
        if (matches(d, raw, context)) return raw;
        enqueue(d, raw);
    }
}

struct notify_wait {
    uint32_t target, time;
};

/// The answer to this read: a late answer to an earlier one (another target, or the owner
/// before this one) does not match.
static int is_selection_notify(hx_display *d, const xcb_generic_event_t *raw, const void *context) {
    const struct notify_wait *wanted = context;
    uint32_t time, requestor, selection, target;
    if ((raw->response_type & 0x7F) != SELECTION_NOTIFY) return 0;
    memcpy(&time, (const uint8_t *)raw + 4, 4);
    memcpy(&requestor, (const uint8_t *)raw + 8, 4);
    memcpy(&selection, (const uint8_t *)raw + 12, 4);
    memcpy(&target, (const uint8_t *)raw + 16, 4);
    return requestor == d->window && selection == d->clipboard && target == wanted->target && time == wanted->time;
}

struct property_wait {
    uint32_t window, atom;
    uint8_t state;
};

static int is_property_notify(hx_display *d, const xcb_generic_event_t *raw, const void *context) {
    (void)d;
    const struct property_wait *wanted = context;
    uint32_t window, atom;
    if ((raw->response_type & 0x7F) != PROPERTY_NOTIFY) return 0;
    memcpy(&window, (const uint8_t *)raw + 4, 4);
    memcpy(&atom, (const uint8_t *)raw + 8, 4);
    return window == wanted->window && atom == wanted->atom && ((const uint8_t *)raw)[16] == wanted->state;
}

static int append(uint8_t **bytes, size_t *length, size_t *capacity, const void *more, size_t count, size_t limit) {
    if (*length + count > limit) return -1;
    if (*length + count > *capacity) {
        size_t grown = *capacity ? *capacity * 2 : 4096;
        while (grown < *length + count) grown *= 2;
        uint8_t *larger = realloc(*bytes, grown);
        if (!larger) return -1;
        *bytes = larger;
        *capacity = grown;
    }
    memcpy(*bytes + *length, more, count);
    *length += count;
    return 0;
}

int hx_read(hx_display *d, uint32_t target, uint32_t time, uint8_t **bytes, size_t *length, uint32_t *type, int timeout_ms, size_t limit) {
    *bytes = NULL;
    *length = 0;
    *type = 0;
    long long deadline = now_ms() + timeout_ms;
    uint32_t property = d->properties[d->next_property++ % 4];
    xcb.delete_property(d->connection, d->window, property);
    xcb.convert_selection(d->connection, d->window, d->clipboard, target, property, time);
    xcb.flush(d->connection);
    int failed = 0;
    struct notify_wait answer = {.target = target, .time = time};
    xcb_generic_event_t *notify = wait_for(d, deadline, is_selection_notify, &answer, &failed);
    if (!notify) return failed ? -1 : 2;
    uint32_t answered;
    memcpy(&answered, (const uint8_t *)notify + 20, 4);
    free(notify);
    if (answered == 0) return 1;
    xcb_get_property_reply_t *reply =
        xcb.get_property_reply(d->connection, xcb.get_property(d->connection, 1, d->window, property, 0, 0, UINT32_MAX / 4), NULL);
    if (!reply) return 1;
    size_t capacity = 0;
    *type = reply->type;
    if (reply->type != d->incr) {
        int result = append(bytes, length, &capacity, xcb.get_property_value(reply), (size_t)xcb.get_property_value_length(reply), limit) == 0 ? 0 : 3;
        free(reply);
        if (result != 0) {
            free(*bytes);
            *bytes = NULL;
            *length = 0;
        }
        return result;
    }
    free(reply);
    // INCR: the owner writes each part once the last was deleted, then an empty one.
    xcb.flush(d->connection);
    struct property_wait wanted = {.window = d->window, .atom = property, .state = PROPERTY_NEW_VALUE};
    for (;;) {
        xcb_generic_event_t *event = wait_for(d, deadline, is_property_notify, &wanted, &failed);
        if (!event) {
            free(*bytes);
            *bytes = NULL;
            *length = 0;
            return failed ? -1 : 2;
        }
        free(event);
        xcb_get_property_reply_t *part =
            xcb.get_property_reply(d->connection, xcb.get_property(d->connection, 1, d->window, property, 0, 0, UINT32_MAX / 4), NULL);
        xcb.flush(d->connection);
        if (!part) continue;
        int count = xcb.get_property_value_length(part);
        if (count == 0) {
            *type = part->type;
            free(part);
            if (!*bytes) *bytes = malloc(1);
            return 0;
        }
        if (append(bytes, length, &capacity, xcb.get_property_value(part), (size_t)count, limit) != 0) {
            free(part);
            free(*bytes);
            *bytes = NULL;
            *length = 0;
            return 3;
        }
        free(part);
    }
}

int hx_own(hx_display *d) {
    // A server timestamp, from a property change on our own window (ICCCM: not CurrentTime).
    long long deadline = now_ms() + 2000;
    xcb.change_property(d->connection, PROP_MODE_APPEND, d->window, d->timestamp, ATOM_INTEGER, 32, 0, NULL);
    xcb.flush(d->connection);
    struct property_wait wanted = {.window = d->window, .atom = d->timestamp, .state = PROPERTY_NEW_VALUE};
    int failed = 0;
    xcb_generic_event_t *event = wait_for(d, deadline, is_property_notify, &wanted, &failed);
    if (!event) return -1;
    memcpy(&d->owned_at, (const uint8_t *)event + 12, 4);
    free(event);
    xcb.set_selection_owner(d->connection, d->window, d->clipboard, d->owned_at);
    xcb_get_selection_owner_reply_t *owner = xcb.get_selection_owner_reply(d->connection, xcb.get_selection_owner(d->connection, d->clipboard), NULL);
    int owning = owner && owner->owner == d->window;
    free(owner);
    d->owning = owning;
    return owning ? 0 : -1;
}

void hx_disown(hx_display *d) {
    if (!d->owning) return;
    xcb.set_selection_owner(d->connection, 0, d->clipboard, d->owned_at);
    xcb.flush(d->connection);
    d->owning = 0;
}

static void notify(hx_display *d, const hx_event *request, uint32_t property) {
    uint8_t event[32] = {0};
    event[0] = SELECTION_NOTIFY;
    memcpy(event + 4, &request->time, 4);
    memcpy(event + 8, &request->requestor, 4);
    memcpy(event + 12, &d->clipboard, 4);
    memcpy(event + 16, &request->target, 4);
    memcpy(event + 20, &property, 4);
    xcb.send_event(d->connection, 0, request->requestor, 0, (const char *)event);
    xcb.flush(d->connection);
}

void hx_refuse(hx_display *d, const hx_event *request) { notify(d, request, 0); }

int hx_answer_atoms(hx_display *d, const hx_event *request, const uint32_t *atoms, int count) {
    uint32_t property = request->property ? request->property : request->target;
    xcb.change_property(d->connection, PROP_MODE_REPLACE, request->requestor, property, ATOM_ATOM, 32, (uint32_t)count, atoms);
    notify(d, request, property);
    return 0;
}

int hx_answer(hx_display *d, const hx_event *request, uint32_t type, const uint8_t *bytes, size_t length, int timeout_ms) {
    uint32_t property = request->property ? request->property : request->target;
    if (request->target == d->timestamp) {
        xcb.change_property(d->connection, PROP_MODE_REPLACE, request->requestor, property, ATOM_INTEGER, 32, 1, &d->owned_at);
        notify(d, request, property);
        return 0;
    }
    if (length <= d->chunk) {
        xcb.change_property(d->connection, PROP_MODE_REPLACE, request->requestor, property, type, 8, (uint32_t)length, bytes);
        notify(d, request, property);
        return 0;
    }
    // INCR: announce the size, then a part each time the requestor deletes the last one.
    long long deadline = now_ms() + timeout_ms;
    uint32_t mask = EVENT_MASK_PROPERTY_CHANGE;
    xcb.change_window_attributes(d->connection, request->requestor, CW_EVENT_MASK, &mask);
    uint32_t size = length > UINT32_MAX ? UINT32_MAX : (uint32_t)length;
    xcb.change_property(d->connection, PROP_MODE_REPLACE, request->requestor, property, d->incr, 32, 1, &size);
    notify(d, request, property);
    struct property_wait deleted = {.window = request->requestor, .atom = property, .state = PROPERTY_DELETE};
    size_t offset = 0;
    int result = 0;
    for (;;) {
        int failed = 0;
        xcb_generic_event_t *event = wait_for(d, deadline, is_property_notify, &deleted, &failed);
        if (!event) {
            result = -1;
            break;
        }
        free(event);
        size_t part = length - offset < d->chunk ? length - offset : d->chunk;
        xcb.change_property(d->connection, PROP_MODE_REPLACE, request->requestor, property, type, 8, (uint32_t)part, bytes + offset);
        xcb.flush(d->connection);
        if (part == 0) break;
        offset += part;
    }
    uint32_t none = 0;
    xcb.change_window_attributes(d->connection, request->requestor, CW_EVENT_MASK, &none);
    xcb.flush(d->connection);
    return result;
}
