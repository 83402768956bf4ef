#!/bin/bash
# Exits 0 when squid answers on 127.0.0.1:3128 (any HTTP status will do).
exec 3<>/dev/tcp/127.0.0.1/3128 || exit 1
printf 'GET / HTTP/1.0\r\n\r\n' >&3
IFS= read -r -t 2 line <&3 || exit 1
[[ "${line}" == HTTP/* ]]
