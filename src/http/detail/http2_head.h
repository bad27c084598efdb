// Internal header of the HTTP/2 engine: response heads, as the handlers write
// them (HTTP/1.1 text), turned into HTTP/2 header blocks. Not for other users.
#pragma once

#include "http/request.h"

#include <nghttp2/nghttp2.h>
#include <string>
#include <string_view>
#include <vector>

namespace lepus::detail {

// The handlers' HTTP/1.1 head text ("HTTP/1.1 200 OK\r\nName: value\r\n...")
// as an HTTP/2 header block in `fields`: ":status" first, names lowercased
// (RFC 9113 §8.2.1), connection fields dropped (§8.2.2). The fields point into
// `text`, a copy of the head lowercased in place with the status digits after
// it: one buffer, no allocation per field once the scratch space has grown
// (nghttp2_submit_response copies the block).
void head_to_fields(int status, std::string_view head, std::string& text,
                    std::vector<nghttp2_nv>& fields);

} // namespace lepus::detail
