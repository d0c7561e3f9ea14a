#!/usr/bin/env bash
# Downloads the three SmolLM2-135M artifact files (CIS-2 §2.1) into DIR and
# verifies each against its pinned sha256 before moving it into place.
#
#   scripts/fetch-smollm2.sh DIR
#
# Each file is fetched to a temporary file in DIR; only a file whose sha256
# matches its pin is renamed to its final name. On a mismatch the temporary
# file is deleted and the script exits non-zero naming the file, the
# expected and the actual hash. Files already present with the right hash
# are not downloaded again.
set -euo pipefail

if [ "$#" -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
DIR=$1
BASE_URL="https://huggingface.co/HuggingFaceTB/SmolLM2-135M/resolve/main"

declare -A PINS=(
  [model.safetensors]=80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1
  [config.json]=1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843
  [tokenizer.json]=9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c
)

sha256_of() {
  sha256sum -- "$1" | cut -d' ' -f1
}

TMP=""
cleanup() {
  if [ -n "$TMP" ] && [ -e "$TMP" ]; then rm -f -- "$TMP"; fi
}
trap cleanup EXIT

# fetch NAME: download, verify, move into place.
fetch() {
  local name=$1 expected=${PINS[$1]} dest="$DIR/$1" actual
  if [ -f "$dest" ] && [ "$(sha256_of "$dest")" = "$expected" ]; then
    echo "$name: already present, sha256 ok"
    return 0
  fi
  TMP=$(mktemp "$DIR/.$name.XXXXXX")
  echo "$name: downloading $BASE_URL/$name"
  if ! curl --fail --location --silent --show-error --retry 3 \
      --output "$TMP" "$BASE_URL/$name"; then
    echo "error: $name: download failed" >&2
    exit 1
  fi
  actual=$(sha256_of "$TMP")
  if [ "$actual" != "$expected" ]; then
    echo "error: $name: sha256 mismatch: expected $expected, actual $actual" >&2
    exit 1
  fi
  chmod 0644 "$TMP"
  mv -f -- "$TMP" "$dest"
  TMP=""
  echo "$name: sha256 ok"
}

mkdir -p -- "$DIR"
for name in config.json tokenizer.json model.safetensors; do
  fetch "$name"
done
echo "SmolLM2-135M verified in $DIR"
