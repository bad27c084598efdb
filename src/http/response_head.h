// ResponseHead: the head of a complete response as a structure (a status, a
// Content-Length, and header fields in order) that handlers fill and filters
// edit by field name, and that each engine writes in its own format once, at
// the end: HTTP/1.1 text (write_http1_head below, the HTTP/1.1 engine) or an
// HTTP/2 header block (detail/http2_head.h, the HTTP/2 engine). Neither
// engine parses a head again.
//
// Fields live in one text buffer, as the HTTP/1.1 lines they will become,
// each one a pair of offsets into it, so a
// head reused for the next request keeps its capacity: no allocation per
// field or per request once it has grown. A head may also start with a block
// of fields owned by someone else, whose HTTP/1.1 text is written as it is (a
// cached file's Content-Type .. Accept-Ranges lines, built once per file):
// the HTTP/1.1 engine appends the block in one copy, as it did when heads
// were text. An edit that names a field of the block first copies the block
// into the head's own fields.
//
// Date, Server and Connection are not fields of the head: the engines write
// them (the date once a second, Connection from the connection's state).
#pragma once

#include "http/request.h"

#include <cstdint>
#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lepus {

// Where a field's name and value lie in a text buffer.
struct FieldAt {
    uint32_t name_at = 0, name_size = 0;
    uint32_t value_at = 0, value_size = 0;

    std::string_view name(std::string_view text) const { return text.substr(name_at, name_size); }
    std::string_view value(std::string_view text) const {
        return text.substr(value_at, value_size);
    }
};

// Appends "name: value\r\n" to `text` and the field's offsets to `fields`: how
// the owner of a block (ResponseHead::set_block) builds it.
void append_field_line(std::string_view name, std::string_view value, std::string& text,
                       std::vector<FieldAt>& fields);

class ResponseHead {
public:
    int status = 0;
    // Written by the engine as Content-Length (never a field of its own).
    std::optional<uint64_t> content_length;

    // Appends a field (several of one name may exist: Set-Cookie).
    void add(std::string_view name, std::string_view value);
    // Replaces the first field named `name` (case-insensitively) and drops the
    // others of that name; appends the field if there is none.
    void set(std::string_view name, std::string_view value);
    // Drops every field named `name`; returns how many there were.
    size_t remove(std::string_view name);
    // The value of the first field named `name`.
    std::optional<std::string_view> get(std::string_view name) const;

    // `lines` ("Name: value\r\n" ...) and the offsets of its fields, owned by
    // the caller and kept alive as long as this head (a cached file, which the
    // Response holds): the first fields of the head. Call on an empty head.
    void set_block(std::string_view lines, std::span<const FieldAt> fields);

    // Fields in order, the block's first: f(name, value).
    template <typename F> void for_each(F&& f) const;
    size_t field_count() const { return block_fields_.size() + fields_.size(); }
    // Back to the empty state, keeping capacity.
    void clear();
    // Bytes this head holds of its own (not the shared block): what a stream
    // that cannot send keeps in memory (the HTTP/2 engine's bound).
    size_t capacity() const { return text_.capacity() + fields_.capacity() * sizeof(FieldAt); }

    // The fields as HTTP/1.1 lines (the block's text copied in one piece).
    void append_http1_fields(std::string& out) const;
    // The same lines where they lie, the block's then the own ones, when the
    // own text holds nothing else (no edit rewrote it): equal lines are equal
    // fields, which lets the HTTP/2 engine recognise a head it encoded before.
    bool fields_text(std::string_view& block, std::string_view& own) const {
        if (rewritten_) return false;
        block = block_text_;
        own = text_;
        return true;
    }

private:
    // Copies the block's fields into the head's own, ahead of them (before an
    // edit that concerns one of them).
    void take_block();
    bool block_has(std::string_view name) const;

    // The own fields' "Name: value\r\n" lines; after an edit (set, remove)
    // also stray values, and the fields are then written one by one.
    std::string text_;
    std::vector<FieldAt> fields_;
    bool rewritten_ = false;
    std::string_view block_text_;
    std::span<const FieldAt> block_fields_;
};

// The HTTP/1.1 status line ("HTTP/1.1 200 OK\r\n").
void append_status_line(int status, std::string& out);

// The whole HTTP/1.1 head into `out` (cleared first): the status line, Date and
// Server, the fields, Content-Length, the Connection field the connection's
// state asks for (close, or keep-alive to an HTTP/1.0 client: RFC 9112 §9.3)
// and the empty line.
void write_http1_head(const ResponseHead& head, time_t now, bool keep_alive, int version_minor,
                      std::string& out);

template <typename F> void ResponseHead::for_each(F&& f) const {
    for (const FieldAt& field : block_fields_)
        f(field.name(block_text_), field.value(block_text_));
    for (const FieldAt& field : fields_)
        f(field.name(text_), field.value(text_));
}

} // namespace lepus
