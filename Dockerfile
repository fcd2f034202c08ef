# tibinlog as a container image: `tibinlog server` (see docker-compose.yml for a whole cluster).
#
#   docker build -t tibinlog .
#   docker run -p 3306:3306 -v tibinlog-data:/var/lib/tibinlog tibinlog \
#       --pd pd:2379 --listen 0.0.0.0:3306 --data-dir /var/lib/tibinlog
#
# The build stage compiles RocksDB (C++, through the rocksdb crate): bindgen needs libclang,
# the C++ part needs g++, the etcd client's protos need protoc (the project's own come with a
# protoc crate).

FROM rust:1-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends clang libclang-dev g++ protobuf-compiler libprotobuf-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin tibinlog \
    && cp target/release/tibinlog /usr/local/bin/tibinlog

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --home-dir /var/lib/tibinlog --shell /usr/sbin/nologin tibinlog \
    && mkdir -p /var/lib/tibinlog \
    && chown tibinlog:tibinlog /var/lib/tibinlog
COPY --from=build /usr/local/bin/tibinlog /usr/local/bin/tibinlog
USER tibinlog
VOLUME /var/lib/tibinlog
EXPOSE 3306
ENTRYPOINT ["tibinlog", "server"]
CMD ["--help"]
