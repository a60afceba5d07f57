// The Wayland clipboard through libwayland-client, loaded with dlopen, and a data-control
// protocol. The declarations below are libwayland-client's ABI as wayland-client-core.h and
// wayland-util.h give it; the interface tables are what wayland-scanner makes of each protocol's
// XML (ext-data-control-v1 from wayland-protocols, wlr-data-control-unstable-v1 from
// wlr-protocols, version 1 of each: the clipboard only, no primary selection).
#define _GNU_SOURCE
#include "CHandoffWayland.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct wl_proxy;
struct wl_display;
struct wl_interface;
struct wl_message {
    const char *name;
    const char *signature;
    const struct wl_interface **types;
};
struct wl_interface {
    const char *name;
    int version;
    int method_count;
    const struct wl_message *methods;
    int event_count;
    const struct wl_message *events;
};
union wl_argument {
    int32_t i;
    uint32_t u;
    int32_t f;
    const char *s;
    void *o;
    uint32_t n;
    void *a;
    int32_t h;
};

static struct {
    int loaded;
    struct wl_display *(*display_connect)(const char *);
    void (*display_disconnect)(struct wl_display *);
    int (*display_get_fd)(struct wl_display *);
    int (*display_roundtrip)(struct wl_display *);
    int (*display_dispatch_pending)(struct wl_display *);
    int (*display_prepare_read)(struct wl_display *);
    int (*display_read_events)(struct wl_display *);
    void (*display_cancel_read)(struct wl_display *);
    int (*display_flush)(struct wl_display *);
    int (*display_get_error)(struct wl_display *);
    struct wl_proxy *(*marshal_constructor)(struct wl_proxy *, uint32_t, union wl_argument *, const struct wl_interface *, uint32_t);
    void (*marshal)(struct wl_proxy *, uint32_t, union wl_argument *);
    int (*add_listener)(struct wl_proxy *, void (**)(void), void *);
    void (*proxy_destroy)(struct wl_proxy *);
    void *(*get_user_data)(struct wl_proxy *);
    uint32_t (*get_version)(struct wl_proxy *);
    const struct wl_interface *registry_interface;
    const struct wl_interface *seat_interface;
} wl;

/// One data-control protocol's interfaces: the manager, a seat's device, a source this client
/// offers, an offer of another client's copy.
struct protocol {
    char names[4][40];
    struct wl_interface manager, device, source, offer;
    struct wl_message manager_requests[3], device_requests[3], device_events[4];
    struct wl_message source_requests[2], source_events[2], offer_requests[2], offer_events[1];
    const struct wl_interface *types[10];
};

static struct protocol ext_protocol, wlr_protocol;

enum {
    MANAGER_CREATE_DATA_SOURCE = 0,
    MANAGER_GET_DATA_DEVICE = 1,
    MANAGER_DESTROY = 2,
    DEVICE_SET_SELECTION = 0,
    DEVICE_DESTROY = 1,
    SOURCE_OFFER = 0,
    SOURCE_DESTROY = 1,
    OFFER_RECEIVE = 0,
    OFFER_DESTROY = 1,
    DISPLAY_GET_REGISTRY = 1,
    REGISTRY_BIND = 0,
};

/// Fills `p` for the protocol whose interfaces are named `prefix`_data_control_*_v1.
static void build(struct protocol *p, const char *prefix) {
    const char *parts[4] = {"manager", "device", "source", "offer"};
    for (int i = 0; i < 4; i++) snprintf(p->names[i], sizeof p->names[i], "%s_data_control_%s_v1", prefix, parts[i]);
    p->types[0] = NULL;
    p->types[1] = NULL;
    p->types[2] = &p->source;
    p->types[3] = &p->device;
    p->types[4] = wl.seat_interface;
    p->types[5] = &p->source;
    p->types[6] = &p->source;
    p->types[7] = &p->offer;
    p->types[8] = &p->offer;
    p->types[9] = &p->offer;
    p->manager_requests[0] = (struct wl_message){"create_data_source", "n", p->types + 2};
    p->manager_requests[1] = (struct wl_message){"get_data_device", "no", p->types + 3};
    p->manager_requests[2] = (struct wl_message){"destroy", "", p->types};
    p->device_requests[0] = (struct wl_message){"set_selection", "?o", p->types + 5};
    p->device_requests[1] = (struct wl_message){"destroy", "", p->types};
    p->device_requests[2] = (struct wl_message){"set_primary_selection", "2?o", p->types + 6};
    p->device_events[0] = (struct wl_message){"data_offer", "n", p->types + 7};
    p->device_events[1] = (struct wl_message){"selection", "?o", p->types + 8};
    p->device_events[2] = (struct wl_message){"finished", "", p->types};
    p->device_events[3] = (struct wl_message){"primary_selection", "2?o", p->types + 9};
    p->source_requests[0] = (struct wl_message){"offer", "s", p->types};
    p->source_requests[1] = (struct wl_message){"destroy", "", p->types};
    p->source_events[0] = (struct wl_message){"send", "sh", p->types};
    p->source_events[1] = (struct wl_message){"cancelled", "", p->types};
    p->offer_requests[0] = (struct wl_message){"receive", "sh", p->types};
    p->offer_requests[1] = (struct wl_message){"destroy", "", p->types};
    p->offer_events[0] = (struct wl_message){"offer", "s", p->types};
    p->manager = (struct wl_interface){p->names[0], 1, 3, p->manager_requests, 0, NULL};
    p->device = (struct wl_interface){p->names[1], 1, 3, p->device_requests, 4, p->device_events};
    p->source = (struct wl_interface){p->names[2], 1, 2, p->source_requests, 2, p->source_events};
    p->offer = (struct wl_interface){p->names[3], 1, 2, p->offer_requests, 1, p->offer_events};
}

static int load(char *error, size_t size) {
    if (wl.loaded) return 0;
    void *library = dlopen("libwayland-client.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(error, size, "libwayland-client is not installed (%s): install libwayland-client0", dlerror());
        return -1;
    }
#define FIND(field, name)                                                                     \
    do {                                                                                      \
        *(void **)(&wl.field) = dlsym(library, name);                                         \
        if (!wl.field) {                                                                      \
            snprintf(error, size, "libwayland-client has no %s: it is too old", name);        \
            return -1;                                                                        \
        }                                                                                     \
    } while (0)
    FIND(display_connect, "wl_display_connect");
    FIND(display_disconnect, "wl_display_disconnect");
    FIND(display_get_fd, "wl_display_get_fd");
    FIND(display_roundtrip, "wl_display_roundtrip");
    FIND(display_dispatch_pending, "wl_display_dispatch_pending");
    FIND(display_prepare_read, "wl_display_prepare_read");
    FIND(display_read_events, "wl_display_read_events");
    FIND(display_cancel_read, "wl_display_cancel_read");
    FIND(display_flush, "wl_display_flush");
    FIND(display_get_error, "wl_display_get_error");
    FIND(marshal_constructor, "wl_proxy_marshal_array_constructor_versioned");
    FIND(marshal, "wl_proxy_marshal_array");
    FIND(add_listener, "wl_proxy_add_listener");
    FIND(proxy_destroy, "wl_proxy_destroy");
    FIND(get_user_data, "wl_proxy_get_user_data");
    FIND(get_version, "wl_proxy_get_version");
    FIND(registry_interface, "wl_registry_interface");
    FIND(seat_interface, "wl_seat_interface");
#undef FIND
    build(&ext_protocol, "ext");
    build(&wlr_protocol, "zwlr");
    wl.loaded = 1;
    return 0;
}

/// Marks the sources this client makes: an offer carrying it is this client's own.
static const char *const own_marker = "application/x-handoff-clipboard";

struct offer {
    struct wl_proxy *proxy;
    char **types;
    int count, capacity;
    int own;
};

struct hw_display {
    struct wl_display *display;
    struct wl_proxy *registry, *seat, *manager, *device, *source;
    const struct protocol *protocol;
    uint32_t seat_name, ext_name, wlr_name;
    int have_seat, have_ext, have_wlr;
    struct offer *current;
    /// Events made by the listeners, handed out by hw_next_event.
    hw_event *queue;
    size_t queued, capacity;
    /// Whether listeners queue selection events yet (not for the clipboard found at connection).
    int started;
};

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void enqueue(hw_display *d, hw_event event) {
    if (event.kind == HW_EVENT_SELECTION || event.kind == HW_EVENT_CLEARED) {
        // Only the newest state of the clipboard counts.
        size_t kept = 0;
        for (size_t i = 0; i < d->queued; i++) {
            if (d->queue[i].kind == HW_EVENT_SELECTION || d->queue[i].kind == HW_EVENT_CLEARED) continue;
            d->queue[kept++] = d->queue[i];
        }
        d->queued = kept;
        if (!d->started) return;
    }
    if (d->queued == d->capacity) {
        d->capacity = d->capacity ? d->capacity * 2 : 16;
        d->queue = realloc(d->queue, d->capacity * sizeof *d->queue);
    }
    d->queue[d->queued++] = event;
}

static void destroy_offer(struct offer *offer) {
    if (!offer) return;
    wl.marshal(offer->proxy, OFFER_DESTROY, NULL);
    wl.proxy_destroy(offer->proxy);
    for (int i = 0; i < offer->count; i++) free(offer->types[i]);
    free(offer->types);
    free(offer);
}

// MARK: Listeners

static void offer_offered(void *data, struct wl_proxy *proxy, const char *type) {
    (void)proxy;
    struct offer *offer = data;
    if (strcmp(type, own_marker) == 0) {
        offer->own = 1;
        return;
    }
    if (offer->count >= 1024) return;
    if (offer->count == offer->capacity) {
        offer->capacity = offer->capacity ? offer->capacity * 2 : 8;
        offer->types = realloc(offer->types, (size_t)offer->capacity * sizeof *offer->types);
    }
    offer->types[offer->count++] = strdup(type);
}

static void (*offer_listener[])(void) = {(void (*)(void))offer_offered};

static void device_data_offer(void *data, struct wl_proxy *device, struct wl_proxy *proxy) {
    (void)data;
    (void)device;
    struct offer *offer = calloc(1, sizeof *offer);
    offer->proxy = proxy;
    wl.add_listener(proxy, offer_listener, offer);
}

static void device_selection(void *data, struct wl_proxy *device, struct wl_proxy *proxy) {
    (void)device;
    hw_display *d = data;
    struct offer *offer = proxy ? wl.get_user_data(proxy) : NULL;
    if (d->current && d->current != offer) destroy_offer(d->current);
    d->current = offer;
    if (offer && offer->own) return;
    enqueue(d, (hw_event){.kind = offer ? HW_EVENT_SELECTION : HW_EVENT_CLEARED, .fd = -1});
}

static void device_finished(void *data, struct wl_proxy *device) {
    (void)device;
    enqueue(data, (hw_event){.kind = HW_EVENT_FINISHED, .fd = -1});
}

static void device_primary_selection(void *data, struct wl_proxy *device, struct wl_proxy *proxy) {
    (void)device;
    hw_display *d = data;
    struct offer *offer = proxy ? wl.get_user_data(proxy) : NULL;
    if (offer && offer != d->current) destroy_offer(offer);
}

static void (*device_listener[])(void) = {
    (void (*)(void))device_data_offer, (void (*)(void))device_selection, (void (*)(void))device_finished,
    (void (*)(void))device_primary_selection};

static void source_send(void *data, struct wl_proxy *source, const char *type, int32_t fd) {
    hw_display *d = data;
    if (source != d->source) {
        close(fd);
        return;
    }
    enqueue(d, (hw_event){.kind = HW_EVENT_SEND, .fd = fd, .type = strdup(type)});
}

static void source_cancelled(void *data, struct wl_proxy *source) {
    hw_display *d = data;
    if (source == d->source) {
        d->source = NULL;
        enqueue(d, (hw_event){.kind = HW_EVENT_CANCELLED, .fd = -1});
    }
    wl.marshal(source, SOURCE_DESTROY, NULL);
    wl.proxy_destroy(source);
}

static void (*source_listener[])(void) = {(void (*)(void))source_send, (void (*)(void))source_cancelled};

static void registry_global(void *data, struct wl_proxy *registry, uint32_t name, const char *interface, uint32_t version) {
    (void)registry;
    (void)version;
    hw_display *d = data;
    if (strcmp(interface, "wl_seat") == 0 && !d->have_seat) {
        d->seat_name = name;
        d->have_seat = 1;
    } else if (strcmp(interface, ext_protocol.names[0]) == 0) {
        d->ext_name = name;
        d->have_ext = 1;
    } else if (strcmp(interface, wlr_protocol.names[0]) == 0) {
        d->wlr_name = name;
        d->have_wlr = 1;
    }
}

static void registry_global_remove(void *data, struct wl_proxy *registry, uint32_t name) {
    (void)data;
    (void)registry;
    (void)name;
}

static void (*registry_listener[])(void) = {(void (*)(void))registry_global, (void (*)(void))registry_global_remove};

static struct wl_proxy *bind_global(hw_display *d, uint32_t name, const struct wl_interface *interface) {
    union wl_argument arguments[4] = {{.u = name}, {.s = interface->name}, {.u = 1}, {.o = NULL}};
    return wl.marshal_constructor(d->registry, REGISTRY_BIND, arguments, interface, 1);
}

// MARK: The display

hw_display *hw_open(const char *name, char *error, size_t error_size) {
    if (load(error, error_size) != 0) return NULL;
    struct wl_display *display = wl.display_connect(name);
    if (!display) {
        const char *shown = name ? name : getenv("WAYLAND_DISPLAY");
        snprintf(error, error_size, "cannot connect to the Wayland display '%s' (%s)", shown ? shown : "wayland-0", strerror(errno));
        return NULL;
    }
    hw_display *d = calloc(1, sizeof *d);
    d->display = display;
    union wl_argument none[1] = {{.o = NULL}};
    d->registry = wl.marshal_constructor((struct wl_proxy *)display, DISPLAY_GET_REGISTRY, none, wl.registry_interface, 1);
    wl.add_listener(d->registry, registry_listener, d);
    if (wl.display_roundtrip(display) < 0) {
        snprintf(error, error_size, "the Wayland display closed the connection");
        hw_close(d);
        return NULL;
    }
    if (!d->have_ext && !d->have_wlr) {
        snprintf(error, error_size,
                 "the Wayland compositor offers no data-control protocol (ext_data_control_manager_v1 or "
                 "zwlr_data_control_manager_v1), which a clipboard service needs: GNOME has neither");
        hw_close(d);
        return NULL;
    }
    if (!d->have_seat) {
        snprintf(error, error_size, "the Wayland compositor has no seat, and so no clipboard");
        hw_close(d);
        return NULL;
    }
    d->protocol = d->have_ext ? &ext_protocol : &wlr_protocol;
    d->seat = bind_global(d, d->seat_name, wl.seat_interface);
    d->manager = bind_global(d, d->have_ext ? d->ext_name : d->wlr_name, &d->protocol->manager);
    union wl_argument device[2] = {{.o = NULL}, {.o = d->seat}};
    d->device = wl.marshal_constructor(d->manager, MANAGER_GET_DATA_DEVICE, device, &d->protocol->device, 1);
    wl.add_listener(d->device, device_listener, d);
    // The clipboard as it is now arrives first: it was copied before this service ran, at a time
    // nobody knows, so it is not offered (an app's next copy is).
    if (wl.display_roundtrip(display) < 0) {
        snprintf(error, error_size, "the Wayland compositor refused the clipboard (error %d)", wl.display_get_error(display));
        hw_close(d);
        return NULL;
    }
    d->started = 1;
    return d;
}

void hw_close(hw_display *d) {
    if (!d) return;
    for (size_t i = 0; i < d->queued; i++) hw_event_clear(&d->queue[i]);
    free(d->queue);
    wl.display_disconnect(d->display);
    free(d);
}

const char *hw_protocol(hw_display *d) { return d->protocol->names[0]; }

int hw_fd(hw_display *d) { return wl.display_get_fd(d->display); }

void hw_event_clear(hw_event *event) {
    free(event->type);
    event->type = NULL;
    if (event->fd >= 0) close(event->fd);
    event->fd = -1;
}

static int pop(hw_display *d, hw_event *event) {
    if (d->queued == 0) return 0;
    *event = d->queue[0];
    memmove(d->queue, d->queue + 1, (d->queued - 1) * sizeof *d->queue);
    d->queued--;
    return 1;
}

int hw_next_event(hw_display *d, hw_event *event, int timeout_ms) {
    if (pop(d, event)) return 1;
    while (wl.display_prepare_read(d->display) != 0) {
        if (wl.display_dispatch_pending(d->display) < 0) return -1;
    }
    if (d->queued) {
        wl.display_cancel_read(d->display);
        return pop(d, event);
    }
    if (wl.display_flush(d->display) < 0 && errno != EAGAIN) {
        wl.display_cancel_read(d->display);
        return -1;
    }
    struct pollfd fd = {.fd = wl.display_get_fd(d->display), .events = POLLIN};
    int ready = poll(&fd, 1, timeout_ms);
    if (ready > 0) {
        if (wl.display_read_events(d->display) < 0) return -1;
    } else {
        wl.display_cancel_read(d->display);
        if (ready < 0 && errno != EINTR) return -1;
    }
    if (wl.display_dispatch_pending(d->display) < 0) return -1;
    return pop(d, event);
}

const char *hw_offer_type(hw_display *d, int index) {
    if (!d->current || index < 0 || index >= d->current->count) return NULL;
    return d->current->types[index];
}

int hw_read(hw_display *d, const char *type, uint8_t **bytes, size_t *length, int timeout_ms, size_t limit) {
    *bytes = NULL;
    *length = 0;
    if (!d->current) return 1;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    union wl_argument arguments[2] = {{.s = type}, {.h = fds[1]}};
    wl.marshal(d->current->proxy, OFFER_RECEIVE, arguments);
    // libwayland sends a copy of the descriptor: the app's end closes when it is done writing.
    close(fds[1]);
    if (wl.display_flush(d->display) < 0 && errno != EAGAIN) {
        close(fds[0]);
        return -1;
    }
    long long deadline = now_ms() + timeout_ms;
    size_t capacity = 4096;
    uint8_t *buffer = malloc(capacity);
    int result = 0;
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0) {
            result = 2;
            break;
        }
        struct pollfd fd = {.fd = fds[0], .events = POLLIN};
        int ready = poll(&fd, 1, (int)left);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) {
            result = ready == 0 ? 2 : -1;
            break;
        }
        if (*length == capacity) {
            capacity *= 2;
            buffer = realloc(buffer, capacity);
        }
        ssize_t got = read(fds[0], buffer + *length, capacity - *length);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got < 0) {
            result = -1;
            break;
        }
        if (got == 0) break;
        *length += (size_t)got;
        if (*length > limit) {
            result = 3;
            break;
        }
    }
    close(fds[0]);
    if (result != 0) {
        free(buffer);
        *length = 0;
        return result;
    }
    *bytes = buffer;
    return 0;
}

int hw_own(hw_display *d, const char *const *types, int count, int mark) {
    union wl_argument none[1] = {{.o = NULL}};
    struct wl_proxy *source = wl.marshal_constructor(d->manager, MANAGER_CREATE_DATA_SOURCE, none, &d->protocol->source, 1);
    if (!source) return -1;
    wl.add_listener(source, source_listener, d);
    for (int i = 0; i < count; i++) {
        union wl_argument type[1] = {{.s = types[i]}};
        wl.marshal(source, SOURCE_OFFER, type);
    }
    if (mark) {
        union wl_argument marker[1] = {{.s = own_marker}};
        wl.marshal(source, SOURCE_OFFER, marker);
    }
    union wl_argument selection[1] = {{.o = source}};
    wl.marshal(d->device, DEVICE_SET_SELECTION, selection);
    struct wl_proxy *previous = d->source;
    d->source = source;
    if (previous) {
        wl.marshal(previous, SOURCE_DESTROY, NULL);
        wl.proxy_destroy(previous);
    }
    return wl.display_flush(d->display) < 0 && errno != EAGAIN ? -1 : 0;
}

void hw_disown(hw_display *d) {
    if (!d->source) return;
    union wl_argument selection[1] = {{.o = NULL}};
    wl.marshal(d->device, DEVICE_SET_SELECTION, selection);
    wl.marshal(d->source, SOURCE_DESTROY, NULL);
    wl.proxy_destroy(d->source);
    d->source = NULL;
    wl.display_flush(d->display);
}
