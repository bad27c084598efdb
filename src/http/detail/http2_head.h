// Internal header of the HTTP/2 engine: a response head (http/response_head.h)
// as an HTTP/2 header block. Not for other users.
#pragma once

#include "http/response_head.h"

#include <ctime>
#include <nghttp2/nghttp2.h>
#include <string>
#include <vector>

namespace lepus::detail {

// `head` as an HTTP/2 header block in `fields`: ":status" first, then date and
// server, the head's fields with their names lowercased (RFC 9113 §8.2.1)
// and connection fields dropped (§8.2.2), then content-length. Values point
// into `head`; names, the date and digits into `text`. The fields are marked
// NO_COPY: nghttp2 reads them when it packs the HEADERS frame (in a later
// nghttp2_session_mem_send), so `head` and `text` must stay as they are
// until then or until the stream closes (nghttp2 then drops the frame
// unread): the HTTP/2 engine keeps `text` in the stream, beside its head.
void head_to_fields(const ResponseHead& head, time_t now, std::string& text,
                    std::vector<nghttp2_nv>& fields);

} // namespace lepus::detail
