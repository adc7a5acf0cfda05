# syntax=docker/dockerfile:1
# Build: docker build -t tempora .
# Run:   docker run -p 8080:8080 -v tempora-data:/data tempora

FROM rust:1-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY proto ./proto
COPY storage ./storage
COPY migrations ./migrations
COPY api ./api
COPY src ./src
COPY benches/load ./benches/load
COPY benches/recall ./benches/recall
RUN cargo build --release --locked --bin tempora \
 && cp target/release/tempora /usr/local/bin/tempora \
 && strip /usr/local/bin/tempora

FROM debian:bookworm-slim
RUN groupadd --system tempora && useradd --system --gid tempora --home-dir /data tempora \
 && mkdir -p /data && chown tempora:tempora /data
COPY --from=build /usr/local/bin/tempora /usr/local/bin/tempora
USER tempora
WORKDIR /data
VOLUME ["/data"]
# Inside the image the listeners face the container network, not loopback.
ENV TEMPORA_DATA_DIR=/data \
    TEMPORA_HTTP_ADDR=0.0.0.0:8080 \
    TEMPORA_GRPC_ADDR=0.0.0.0:30011 \
    TEMPORA_TCP_ADDR=0.0.0.0:5050
EXPOSE 8080 30011 5050
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 CMD ["tempora", "healthcheck"]
ENTRYPOINT ["tempora"]
CMD ["serve"]
