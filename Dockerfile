# padlock inside the official Redis image.
#   docker build -t redis-padlock .
#   docker run -p 6379:6379 redis-padlock
FROM rust:1-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libclang-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN cargo build --release

FROM redis:7.4
COPY --from=build /src/target/release/libpadlock.so /usr/local/lib/redis/modules/libpadlock.so
CMD ["redis-server", "--loadmodule", "/usr/local/lib/redis/modules/libpadlock.so"]
