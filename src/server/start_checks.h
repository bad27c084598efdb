// The checks `lepus -t` makes beyond the options themselves, and `lepus -V`.
#pragma once

#include "server/options.h"

#include <string>
#include <vector>

namespace lepus {

// -V, as nginx -V: the version, compiler, build options and the versions of
// the libraries this process has loaded (what a bug report needs).
void print_build_info();

// Issue 33, root never serves by accident: refuses --user root (any uid 0)
// without --allow-root, and serving / when it is only the current directory
// (no ROOT given, the cwd is /); started as root without --user or
// --allow-root, sets the user to the default (www-data, else nobody) and
// user_defaulted. One line naming the problem, or empty.
std::string protect_from_root(ServerOptions& options, bool root_given);

// What start-up would refuse beyond the options themselves: --user/--group
// missing or used without root, log directories the service user cannot
// write. One line per problem, empty when none.
std::vector<std::string> check_start_up(const ServerOptions& options);

// Loads and matches every certificate and key the TLS listeners would use:
// one line naming the wrong file, or empty.
std::string check_tls(const ServerOptions& options);

} // namespace lepus
