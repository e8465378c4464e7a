# rlprobe in a container: the CLI and the reference server.
#
#   docker build -t rlprobe .
#   docker run --rm rlprobe version
#   docker run --rm -p 127.0.0.1:8080:8080 rlprobe serve --listen 0.0.0.0:8080 --public \
#       --algorithm token-bucket --rate 5/s --capacity 10
#
# docker-compose.yml builds this image for its reference-server replicas and
# for the `rlprobe` tool service.

FROM golang:1.25-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/rlprobe ./cmd/rlprobe

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /work --create-home rlprobe
COPY --from=build /out/rlprobe /usr/local/bin/rlprobe
# Record files (rlprobe-<command>-<time>.jsonl) land in /work: mount a volume
# there to keep them.
WORKDIR /work
USER rlprobe
EXPOSE 8080
ENTRYPOINT ["rlprobe"]
CMD ["--help"]
