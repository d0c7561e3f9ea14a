#include "keys/identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <openssl/crypto.h>
#include <optional>

#include "keys/ed25519.h"

namespace lockstep::keys {
namespace {

constexpr size_t kMaxKeyFileBytes = 4096;
constexpr size_t kZ85KeyChars = 40;

std::string Hex(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Error messages name the field, never echo its value.
Result<std::array<uint8_t, 32>> Parse32Hex(const std::string& hex, const std::string& what) {
  if (hex.size() != 64) {
    return InvalidError(what + ": expected 64 hex characters, got " + std::to_string(hex.size()));
  }
  std::array<uint8_t, 32> out{};
  for (size_t i = 0; i < 32; ++i) {
    const int hi = HexNibble(hex[2 * i]);
    const int lo = HexNibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidError(what + ": not a hex string");
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

Status CheckZ85Key(const std::string& z85, const std::string& what) {
  if (z85.size() != kZ85KeyChars) {
    return InvalidError(what + ": expected " + std::to_string(kZ85KeyChars) +
                        " Z85 characters, got " + std::to_string(z85.size()));
  }
  uint8_t raw[32];
  if (zmq_z85_decode(raw, z85.c_str()) == nullptr) return InvalidError(what + ": not valid Z85");
  OPENSSL_cleanse(raw, sizeof raw);
  return Status::Ok();
}

// The CURVE public key of a Z85 secret key.
Result<std::string> CurvePublicOf(const std::string& secret_z85) {
  char pub[kZ85KeyChars + 1] = {};
  if (zmq_curve_public(pub, secret_z85.c_str()) != 0) {
    return UnimplementedError("this libzmq has no CURVE support (zmq_curve_public failed)");
  }
  return std::string(pub);
}

struct KeyFile {
  std::map<std::string, std::string> fields;
};

Result<std::string> ReadSmallFile(const std::string& path, bool require_private) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError(path + ": key file not found");
    if (errno == ELOOP) return InvalidError(path + ": is a symbolic link; pass the key file itself");
    return IoError(path + ": cannot open key file: " + std::strerror(errno));
  }
  struct stat st {};
  std::string text;
  Status status;
  if (fstat(fd, &st) != 0) {
    status = IoError(path + ": cannot stat key file: " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = InvalidError(path + ": is not a regular file");
  } else if (st.st_size > static_cast<off_t>(kMaxKeyFileBytes)) {
    status = InvalidError(path + ": " + std::to_string(st.st_size) +
                          " bytes is too large for a key file (limit " +
                          std::to_string(kMaxKeyFileBytes) + ")");
  } else if (require_private && (st.st_mode & 077) != 0) {
    status = InvalidError(path + ": secret key file is readable by group or others; run chmod 600 " +
                          path);
  } else {
    text.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = read(fd, text.data() + got, text.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != text.size()) status = IoError(path + ": short read of key file");
  }
  close(fd);
  if (!status.ok()) {
    OPENSSL_cleanse(text.data(), text.size());
    return status;
  }
  return text;
}

Result<KeyFile> ParseKeyFile(const std::string& path, const std::string& text) {
  static const char* kKnown[] = {"curve_public", "curve_secret", "sign_public", "sign_secret"};
  KeyFile kf;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::string where = path + ":" + std::to_string(line_no);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) return InvalidError(where + ": expected 'name = value'");
    auto trim = [](std::string s) {
      const size_t b = s.find_first_not_of(" \t");
      const size_t e = s.find_last_not_of(" \t");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    std::string name = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    bool known = false;
    for (const char* k : kKnown) known = known || name == k;
    if (!known) {
      return InvalidError(where + ": unknown name '" + name.substr(0, 40) +
                          "' (expected curve_public, curve_secret, sign_public, sign_secret)");
    }
    if (kf.fields.count(name) != 0) return InvalidError(where + ": '" + name + "' appears twice");
    kf.fields[name] = std::move(value);
  }
  return kf;
}

Result<PublicIdentity> ParsePublic(const std::string& path, const KeyFile& kf) {
  for (const char* k : {"curve_public", "sign_public"}) {
    if (kf.fields.count(k) == 0) return InvalidError(path + ": no '" + std::string(k) + "' line");
  }
  PublicIdentity pub;
  pub.curve_public_z85 = kf.fields.at("curve_public");
  LOCKSTEP_RETURN_IF_ERROR(CheckZ85Key(pub.curve_public_z85, path + ": curve_public"));
  LOCKSTEP_ASSIGN_OR_RETURN(pub.sign_public,
                            Parse32Hex(kf.fields.at("sign_public"), path + ": sign_public"));
  return pub;
}

void Wipe(KeyFile& kf) {
  for (auto& [name, value] : kf.fields) OPENSSL_cleanse(value.data(), value.size());
}

// Writes `text` to `path` through a temporary in the same folder, then
// links (no overwrite) or renames (overwrite) it into place.
Status WriteFileAtomically(const std::string& path, const std::string& text, mode_t mode,
                           bool overwrite) {
  std::string tmp = path + ".tmpXXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return IoError(path + ": cannot create a file next to it: " + std::strerror(errno));
  Status status;
  if (fchmod(fd, mode) != 0) status = IoError(tmp + ": chmod failed: " + std::strerror(errno));
  size_t done = 0;
  while (status.ok() && done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) status = IoError(tmp + ": write failed: " + std::strerror(errno));
    else done += static_cast<size_t>(n);
  }
  if (status.ok() && fsync(fd) != 0) status = IoError(tmp + ": fsync failed: " + std::strerror(errno));
  close(fd);
  if (status.ok()) {
    if (overwrite) {
      if (rename(tmp.c_str(), path.c_str()) != 0) {
        status = IoError(path + ": cannot replace: " + std::strerror(errno));
      }
    } else if (link(tmp.c_str(), path.c_str()) != 0) {
      status = errno == EEXIST
                   ? InvalidError(path + ": already exists; refusing to overwrite a key file")
                   : IoError(path + ": cannot create: " + std::strerror(errno));
    }
  }
  unlink(tmp.c_str());  // after rename: already gone; after link: the extra name
  return status;
}

}  // namespace

Result<Identity> GenerateIdentity() {
  char pub[kZ85KeyChars + 1] = {};
  char sec[kZ85KeyChars + 1] = {};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return UnimplementedError("this libzmq has no CURVE support (zmq_curve_keypair failed)");
  }
  Identity id;
  id.pub.curve_public_z85 = pub;
  id.curve_secret_z85 = sec;
  OPENSSL_cleanse(sec, sizeof sec);
  LOCKSTEP_ASSIGN_OR_RETURN(id.sign_seed, GenerateEd25519Seed());
  LOCKSTEP_ASSIGN_OR_RETURN(id.pub.sign_public, Ed25519PublicFromSeed(id.sign_seed));
  return id;
}

Status WriteIdentity(const Identity& id, const std::string& path, bool overwrite) {
  const std::string pub_path = path + ".pub";
  if (!overwrite) {
    for (const std::string& p : {path, pub_path}) {
      struct stat st {};
      if (lstat(p.c_str(), &st) == 0) {
        return InvalidError(p + ": already exists; refusing to overwrite a key file (--force replaces it)");
      }
    }
  }
  const std::string pub_text = "curve_public = " + id.pub.curve_public_z85 + "\n" +
                               "sign_public = " + SignPublicHex(id.pub) + "\n";
  std::string secret_text = "# lockstep node identity: SECRET, keep private\n" + pub_text +
                            "curve_secret = " + id.curve_secret_z85 + "\n" +
                            "sign_secret = " + Hex(id.sign_seed.data(), id.sign_seed.size()) + "\n";
  Status st = WriteFileAtomically(path, secret_text, 0600, overwrite);
  OPENSSL_cleanse(secret_text.data(), secret_text.size());
  LOCKSTEP_RETURN_IF_ERROR(st);
  return WriteFileAtomically(pub_path, "# lockstep node identity: public\n" + pub_text, 0644,
                             overwrite);
}

Result<Identity> ReadIdentity(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, /*require_private=*/true));
  Result<KeyFile> parsed = ParseKeyFile(path, text);
  OPENSSL_cleanse(text.data(), text.size());
  if (!parsed.ok()) return parsed.status();
  KeyFile& kf = parsed.value();
  struct WipeOnExit {
    KeyFile& kf;
    ~WipeOnExit() { Wipe(kf); }
  } wipe{kf};
  for (const char* k : {"curve_secret", "sign_secret"}) {
    if (kf.fields.count(k) == 0) {
      return InvalidError(path + ": no '" + std::string(k) +
                          "' line (is this a public .pub file? pass the secret key file)");
    }
  }
  Identity id;
  LOCKSTEP_ASSIGN_OR_RETURN(id.pub, ParsePublic(path, kf));
  id.curve_secret_z85 = kf.fields.at("curve_secret");
  LOCKSTEP_RETURN_IF_ERROR(CheckZ85Key(id.curve_secret_z85, path + ": curve_secret"));
  LOCKSTEP_ASSIGN_OR_RETURN(std::string derived, CurvePublicOf(id.curve_secret_z85));
  if (derived != id.pub.curve_public_z85) {
    return MismatchError(path + ": curve_secret does not belong to curve_public");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(id.sign_seed, Parse32Hex(kf.fields.at("sign_secret"), path + ": sign_secret"));
  LOCKSTEP_ASSIGN_OR_RETURN(auto sign_pub, Ed25519PublicFromSeed(id.sign_seed));
  if (sign_pub != id.pub.sign_public) {
    return MismatchError(path + ": sign_secret does not belong to sign_public");
  }
  return id;
}

Result<PublicIdentity> ReadPublicIdentity(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, /*require_private=*/false));
  Result<KeyFile> parsed = ParseKeyFile(path, text);
  OPENSSL_cleanse(text.data(), text.size());
  if (!parsed.ok()) return parsed.status();
  Result<PublicIdentity> pub = ParsePublic(path, parsed.value());
  Wipe(parsed.value());
  return pub;
}

std::string SignPublicHex(const PublicIdentity& pub) {
  return Hex(pub.sign_public.data(), pub.sign_public.size());
}

Result<std::array<uint8_t, 32>> ParseSignPublicHex(const std::string& hex) {
  return Parse32Hex(hex, "Ed25519 public key");
}

}  // namespace lockstep::keys
