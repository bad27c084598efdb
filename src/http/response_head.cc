#include "http/response_head.h"

#include "base/ascii.h"
#include "http/response.h"

#include <algorithm>

namespace lepus {

void append_field_line(std::string_view name, std::string_view value, std::string& text,
                       std::vector<FieldAt>& fields) {
    FieldAt field;
    field.name_at = uint32_t(text.size());
    field.name_size = uint32_t(name.size());
    field.value_at = uint32_t(text.size() + name.size() + 2);
    field.value_size = uint32_t(value.size());
    text.append(name).append(": ").append(value).append("\r\n");
    fields.push_back(field);
}

void ResponseHead::add(std::string_view name, std::string_view value) {
    // Stored as the HTTP/1.1 line it will become: the engine copies the own
    // fields' text in one piece when no edit has dropped one of them.
    append_field_line(name, value, text_, fields_);
}

void ResponseHead::set(std::string_view name, std::string_view value) {
    if (block_has(name)) take_block();
    auto same = [&](const FieldAt& field) { return ascii_iequals(field.name(text_), name); };
    auto first = std::find_if(fields_.begin(), fields_.end(), same);
    if (first == fields_.end()) return add(name, value);
    // The new value goes at the end of the text; the field keeps its place.
    first->value_at = uint32_t(text_.size());
    first->value_size = uint32_t(value.size());
    text_.append(value);
    rewritten_ = true;
    fields_.erase(std::remove_if(first + 1, fields_.end(), same), fields_.end());
}

size_t ResponseHead::remove(std::string_view name) {
    if (block_has(name)) take_block();
    size_t before = fields_.size();
    std::erase_if(fields_,
                  [&](const FieldAt& field) { return ascii_iequals(field.name(text_), name); });
    if (fields_.size() != before) rewritten_ = true;
    return before - fields_.size();
}

std::optional<std::string_view> ResponseHead::get(std::string_view name) const {
    for (const FieldAt& field : block_fields_)
        if (ascii_iequals(field.name(block_text_), name)) return field.value(block_text_);
    for (const FieldAt& field : fields_)
        if (ascii_iequals(field.name(text_), name)) return field.value(text_);
    return std::nullopt;
}

void ResponseHead::set_block(std::string_view lines, std::span<const FieldAt> fields) {
    block_text_ = lines;
    block_fields_ = fields;
}

void ResponseHead::clear() {
    status = 0;
    content_length.reset();
    text_.clear();
    fields_.clear();
    block_text_ = {};
    block_fields_ = {};
    rewritten_ = false;
}

bool ResponseHead::block_has(std::string_view name) const {
    for (const FieldAt& field : block_fields_)
        if (ascii_iequals(field.name(block_text_), name)) return true;
    return false;
}

void ResponseHead::take_block() {
    std::vector<FieldAt> own;
    own.swap(fields_);
    std::string own_text;
    own_text.swap(text_);
    for (const FieldAt& field : block_fields_)
        add(field.name(block_text_), field.value(block_text_));
    for (const FieldAt& field : own)
        add(field.name(own_text), field.value(own_text));
    block_text_ = {};
    block_fields_ = {};
    rewritten_ = false;
}

void ResponseHead::append_http1_fields(std::string& out) const {
    out.append(block_text_);
    if (!rewritten_) {
        out.append(text_); // every own field's line, in order, as added
        return;
    }
    for (const FieldAt& field : fields_)
        out.append(field.name(text_)).append(": ").append(field.value(text_)).append("\r\n");
}

void append_status_line(int status, std::string& out) {
    // RFC 9110 §6.2: we answer with our highest version, 1.1, to 1.0 clients too.
    if (status == 200) {
        out.append("HTTP/1.1 200 OK\r\n"); // most answers: no lookup
        return;
    }
    out.append("HTTP/1.1 ");
    append_decimal(uint64_t(status), out);
    out.push_back(' ');
    out.append(status_reason(status));
    out.append("\r\n");
}

void write_http1_head(const ResponseHead& head, time_t now, bool keep_alive, int version_minor,
                      std::string& out) {
    out.clear();
    append_status_line(head.status, out);
    append_common_headers(now, out);
    head.append_http1_fields(out);
    if (head.content_length) {
        out.append("Content-Length: ");
        append_decimal(*head.content_length, out);
        out.append("\r\n");
    }
    if (!keep_alive) {
        out.append("Connection: close\r\n");
    } else if (version_minor == 0) {
        // RFC 9112 §9.3: a 1.0 connection persists only if the response says so
        // (ab -k waits for this header).
        out.append("Connection: keep-alive\r\n");
    }
    out.append("\r\n");
}

} // namespace lepus
