#include "cli/keygen_command.h"

#include <iostream>

#include "cli/exit_status.h"
#include "keys/identity.h"

namespace lockstep::cli {

CLI::App* AddKeygenCommand(CLI::App& app, KeygenOptions& o) {
  CLI::App* c = app.add_subcommand(
      "keygen", "Write a node identity: OUT (secret, mode 0600) and OUT.pub (public)");
  c->add_option("out", o.out_path, "Secret key file to write (OUT.pub is written next to it)")
      ->required();
  c->add_flag("--force", o.force, "Replace existing key files");
  return c;
}

int RunKeygenCommand(const KeygenOptions& o) {
  Result<keys::Identity> id = keys::GenerateIdentity();
  Status st = id.ok() ? keys::WriteIdentity(*id, o.out_path, o.force) : id.status();
  if (!st.ok()) return ExitStatus("keygen", st);
  std::cout << "wrote " << o.out_path << " (secret, mode 0600) and " << o.out_path
            << ".pub (public)\n"
            << "curve_public = " << id->pub.curve_public_z85 << "\n"
            << "sign_public = " << keys::SignPublicHex(id->pub) << "\n";
  return 0;
}

}  // namespace lockstep::cli
