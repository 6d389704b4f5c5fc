#!/usr/bin/env bash
# Makes a throw-away CA, a server certificate for 127.0.0.1/localhost and a
# client certificate, all signed by the CA, for the TLS integration tests.
# usage: make_test_certs.sh DIR   (needs the openssl command-line tool)
set -eu
dir="$1"
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; }
quiet openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=habitat test CA" \
  -keyout ca.key -out ca.pem
for who in server client; do
  quiet openssl req -newkey rsa:2048 -nodes -subj "/CN=habitat test $who" \
    -keyout "$who.key" -out "$who.csr"
done
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
for who in server client; do
  quiet openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile "$who.ext" -out "$who.pem"
done
# A second, unrelated CA: a client trusting it must refuse the server.
quiet openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=other CA" \
  -keyout other_ca.key -out other_ca.pem
