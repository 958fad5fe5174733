# mtsched in a container, in two stages (docs/DEVELOPING.md, "The .deb and
# the container"):
#   build: Debian 12 with the toolchain (scripts/setup.sh), which builds the
#          .deb (scripts/package.sh);
#   final: Debian 12 slim with only the .deb installed by apt: no compiler,
#          no LLVM, no MPI.
#
#   docker build -t mtsched:0.4.0 .
#   docker run --rm mtsched:0.4.0                  # the README example
#   docker run --rm -v "$PWD:/w" -w /w mtsched:0.4.0 mtsched-opt --pipeline=default my.mir
FROM debian:12 AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY . .
# dpkg-dev: dpkg-shlibdeps, which computes the package's Depends.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates dpkg-dev \
 && bash scripts/setup.sh \
 && MTSCHED_JOBS="$(nproc)" bash scripts/package.sh /build | tee /tmp/package.log \
 && cp "$(tail -n 1 /tmp/package.log)" /

FROM debian:12-slim
COPY --from=build /mtsched_*.deb /tmp/
RUN apt-get update \
 && apt-get install -y --no-install-recommends /tmp/mtsched_*.deb \
 && rm -rf /var/lib/apt/lists/* /tmp/mtsched_*.deb \
 && mtsched-opt --version
CMD ["mtsched-opt", "--pipeline=default", "/usr/share/mtsched/examples/tp_mlp.mir"]
