// The router's ACME step (issue 34): /.well-known/acme-challenge/TOKEN is
// answered with the key authorization the ACME thread published for TOKEN
// (RFC 8555 §8.3), before redirects, auth or any handler can turn the CA's
// validator away. Only while an order is being validated; otherwise the
// path is an ordinary one.
#include "acme/http_challenges.h"
#include "http/response.h"
#include "server/router.h"

namespace lepus {

Router::StepOutcome Router::step_acme_challenge(Exchange& exchange, RouteState&) {
    const Request& request = *exchange.request;
    if (!request.path.starts_with(acme::kHttpChallengePrefix)) return StepOutcome::Continue;
    std::optional<std::string> answer = acme::HttpChallenges::process().find(
        std::string_view(request.path).substr(acme::kHttpChallengePrefix.size()));
    if (!answer) return StepOutcome::Continue;
    Response& response = exchange.response;
    response.owned_body = std::move(*answer);
    begin_head(200, exchange.keep_alive, response);
    response.head.add("Content-Type", "application/octet-stream");
    response.head.content_length = response.owned_body.size();
    if (!request.is_head()) response.body = response.owned_body;
    return StepOutcome::Answered;
}

} // namespace lepus
