// Random mutations of valid requests (a fixed seed, so failures reproduce): whatever
// the bytes, the parser never reads out of bounds (ASan), and the outcome does not
// depend on where the input was cut or whether the buffer moved.
#include "http/request_parser.h"

#include <gtest/gtest.h>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace lepus {
namespace {

struct Outcome {
    ParseStatus status = ParseStatus::Again;
    int error_status = 0;
    size_t head_size = 0;
    std::string path, query, host;
    std::vector<std::string> fields;
    bool operator==(const Outcome&) const = default;
};

Outcome outcome_of(const RequestParser& parser, ParseStatus status) {
    Outcome o;
    o.status = status;
    if (status == ParseStatus::Error) o.error_status = parser.error_status();
    if (status != ParseStatus::Done) return o;
    const Request& r = parser.request();
    o.head_size = parser.head_size();
    o.path = r.path;
    o.query = r.query;
    o.host = r.host;
    for (const Header& h : r.headers)
        o.fields.push_back(std::string(h.name) + ":" + std::string(h.value));
    return o;
}

Outcome parse_in_pieces(const std::string& raw, std::vector<size_t> cuts) {
    RequestParser parser;
    cuts.push_back(raw.size());
    for (size_t cut : cuts) {
        auto buffer = std::make_unique<std::vector<char>>(raw.begin(), raw.begin() + cut);
        ParseStatus status = parser.parse(*buffer);
        if (status != ParseStatus::Again || cut == raw.size()) return outcome_of(parser, status);
    }
    return outcome_of(parser, ParseStatus::Again);
}

TEST(RequestParserMutation, OutcomeIndependentOfCutsAndBufferMoves) {
    const std::string seeds[] = {
        "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nUser-Agent: x\r\n\r\n",
        "POST http://h:80/x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: "
        "chunked\r\n\r\n",
        "OPTIONS * HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n",
        "\r\nCONNECT [::1]:443 HTTP/1.1\nHost: [::1]:443\n\n",
    };
    const char alphabet[] = " \t\r\n:/?#%[]*,;\"\x01\x7f\x80\xff"
                            "aZ09HTTP/1.";
    std::mt19937 rng(20261122);
    int done = 0, errors = 0, again = 0;
    for (int round = 0; round < 4000; ++round) {
        std::string raw = seeds[round % 4];
        int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            size_t at = rng() % raw.size();
            char c = alphabet[rng() % (sizeof alphabet - 1)];
            switch (rng() % 3) {
            case 0:
                raw[at] = c;
                break;
            case 1:
                raw.insert(raw.begin() + static_cast<long>(at), c);
                break;
            default:
                if (raw.size() > 1) raw.erase(at, 1);
                break;
            }
        }
        Outcome whole = parse_in_pieces(raw, {});
        std::vector<size_t> cuts;
        for (size_t at = 1 + rng() % 7; at < raw.size(); at += 1 + rng() % 11)
            cuts.push_back(at);
        ASSERT_EQ(parse_in_pieces(raw, cuts), whole) << testing::PrintToString(raw);
        if (whole.status == ParseStatus::Done) {
            ++done;
            ASSERT_LE(whole.head_size, raw.size());
        } else if (whole.status == ParseStatus::Error) {
            ++errors;
            int s = whole.error_status;
            ASSERT_TRUE(s == 400 || s == 414 || s == 431 || s == 501 || s == 505) << s;
        } else {
            ++again;
        }
    }
    // The mutations must exercise both outcomes for this test to mean anything.
    EXPECT_GT(done, 100);
    EXPECT_GT(errors, 1000);
}

} // namespace
} // namespace lepus
