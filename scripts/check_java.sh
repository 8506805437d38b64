#!/usr/bin/env bash
# Stops setup with one line when Java 17+ (needed by PySpark 4) is missing. A JRE is enough:
# ember's Java helpers ship prebuilt (`make jar` rebuilds them, and that needs a JDK's javac).
set -u
if ! command -v java >/dev/null 2>&1; then
  echo "ember needs Java 17 or newer for PySpark 4: install it (e.g. 'apt-get install openjdk-17-jre-headless') and run make again." >&2
  exit 1
fi
ver=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${ver%%.*}
[ "$major" = "1" ] && major=$(echo "$ver" | cut -d. -f2)
if ! [ "${major:-0}" -ge 17 ] 2>/dev/null; then
  echo "ember needs Java 17 or newer for PySpark 4, found Java ${ver:-unknown}: install Java 17 (e.g. 'apt-get install openjdk-17-jre-headless') and run make again." >&2
  exit 1
fi
