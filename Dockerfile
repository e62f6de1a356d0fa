# trident's container image, in two flavours from this one file:
#
#   nvidia (the default, last stage): NVIDIA's Triton image, for GPU instances. trident replaces
#          Triton's own SageMaker frontend and drives the image's Triton core in-process.
#            docker build -t trident .
#   cpu:   a Debian base with the Triton runtime from PyPI (scripts/install-triton, the runtime
#          the tests use), for CPU instances and for building and testing without NVIDIA's registry.
#            docker build --target cpu -t trident:cpu .
#
#   docker run -p 8080:8080 -v $PWD/examples/models:/opt/ml/model trident:cpu serve
#
# Both carry SageMaker's labels, trident as the entrypoint with `serve` as SageMaker passes it, and
# trident's native backend at /opt/tritonserver/backends/trident beside Triton's; neither keeps
# a toolchain or a build folder. Backends: nvidia has NVIDIA's (onnxruntime, pytorch, tensorrt,
# python, ...) and trident's; cpu has python (PyPI's Triton), trident's, and onnxruntime, which
# is trident's own (the same library, backend/src/onnxruntime/) over ONNX Runtime from PyPI. scripts/image builds the cpu flavour on a base it makes with
# debootstrap, from binaries built on the host (BINARIES=prebuilt), and runs it as SageMaker does;
# docs/DEPLOY.md goes from here to an endpoint.

# The newest Triton release (26.11: every 2026 advisory in SECURITY.md is fixed in it). Its CUDA
# line needs a newer GPU driver than 24.10's did: docs/DEPLOY.md says which AMI.
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:26.11-py3
ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim
# `source`: compile trident in the image's build stage. `prebuilt`: take target/image/trident and
# target/image/libtriton_trident.so from the context (scripts/image puts them there; the cpu
# flavour only, since they are linked against the Debian base's C library).
ARG BINARIES=source

# ---- cpu: Python and numpy for the python backend's stub (built per Python version), and the
# libpython it embeds; the image's base -------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS cpu-python
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-numpy \
 && version=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "libpython$version" \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log

# ---- cpu: the Triton runtime from PyPI, laid out like NVIDIA's /opt/tritonserver -------------
FROM cpu-python AS cpu-triton
# Builds behind a TLS-inspecting proxy name its CA bundle (a path mounted into the build's RUN
# steps; scripts/image mounts the host's) for pip, curl, rustup and cargo. Unset, each uses its
# own.
ARG PIP_CERT
ARG CURL_CA_BUNDLE
ARG SSL_CERT_FILE
ARG CARGO_HTTP_CAINFO
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3-pip patchelf ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY scripts/install-triton /usr/local/src/install-triton
RUN TRITON_PYTHON=/usr/bin/python3 /usr/local/src/install-triton /opt/tritonserver
# ONNX Runtime's library from its pinned PyPI wheel, for trident's onnxruntime backend.
COPY scripts/install-onnxruntime /usr/local/src/install-onnxruntime
RUN /usr/local/src/install-onnxruntime /opt/tritonserver/backends/onnxruntime

# ---- cpu: trident and its native backend, compiled against that runtime ----------------------
FROM cpu-triton AS cpu-build
ARG CURL_CA_BUNDLE
ARG SSL_CERT_FILE
ARG CARGO_HTTP_CAINFO
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      curl build-essential libclang-dev \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/root/.cargo/bin:${PATH}
WORKDIR /src
COPY rust-toolchain.toml scripts/install-rust ./
RUN ./install-rust
COPY . .
RUN TRITON_HOME=/opt/tritonserver scripts/build-release /out

FROM scratch AS cpu-binaries-source
COPY --from=cpu-build /out/ /out/

FROM scratch AS cpu-binaries-prebuilt
COPY target/image/ /out/

FROM cpu-binaries-${BINARIES} AS cpu-binaries

# ---- cpu: the image --------------------------------------------------------------------------
FROM cpu-python AS cpu
COPY --from=cpu-triton /opt/tritonserver /opt/tritonserver
COPY --from=cpu-binaries /out/trident /usr/local/bin/trident
COPY --from=cpu-binaries /out/libtriton_trident.so /opt/tritonserver/backends/trident/libtriton_trident.so
# The same library is the onnxruntime backend (it serves ONNX models when Triton loads it as that).
COPY --from=cpu-binaries /out/libtriton_trident.so /opt/tritonserver/backends/onnxruntime/libtriton_onnxruntime.so
# The vetted plugins trident ships (plugins/README.md): a manifest names them by path and digest.
COPY --from=cpu-binaries /out/plugins/ /opt/trident/plugins/
# Fail the build, not the first request, when a library cannot be resolved.
RUN ! ldd /usr/local/bin/trident /opt/tritonserver/lib/libtritonserver.so \
        /opt/tritonserver/backends/python/libtriton_python.so \
        /opt/tritonserver/backends/python/triton_python_backend_stub.bin \
        /opt/tritonserver/backends/trident/libtriton_trident.so \
        /opt/tritonserver/backends/onnxruntime/libtriton_onnxruntime.so \
        /opt/tritonserver/backends/onnxruntime/libonnxruntime.so.1 | grep 'not found' \
 && /usr/local/bin/trident check-triton
LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true \
      com.amazonaws.sagemaker.capabilities.multi-models=true \
      com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true \
      org.opencontainers.image.title="trident (cpu)" \
      org.opencontainers.image.description="NVIDIA Triton as a SageMaker inference container, CPU runtime from PyPI"
ENV TRITON_HOME=/opt/tritonserver
# mimalloc gives back what trident frees (bench/analysis.md, memory at rest).
ENV MIMALLOC_ARENA_EAGER_COMMIT=0
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/trident"]
CMD ["serve"]

# ---- nvidia: trident compiled against the image's own Triton ----------------------------------
FROM ${TRITON_IMAGE} AS nvidia-build
ARG CURL_CA_BUNDLE
ARG SSL_CERT_FILE
ARG CARGO_HTTP_CAINFO
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates curl build-essential libclang-dev patchelf \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/root/.cargo/bin:${PATH}
WORKDIR /src
COPY rust-toolchain.toml scripts/install-rust ./
RUN ./install-rust
COPY . .
# Bindings from the image's own tritonserver.h rather than trident's declarations.
RUN TRITON_INCLUDE_DIR=/opt/tritonserver/include TRITON_HOME=/opt/tritonserver scripts/build-release /out

# ---- nvidia: the image (the default target) ---------------------------------------------------
FROM ${TRITON_IMAGE} AS nvidia
COPY --from=nvidia-build /out/trident /usr/local/bin/trident
COPY --from=nvidia-build /out/libtriton_trident.so /opt/tritonserver/backends/trident/libtriton_trident.so
COPY --from=nvidia-build /out/plugins/ /opt/trident/plugins/
RUN ! ldd /usr/local/bin/trident /opt/tritonserver/backends/trident/libtriton_trident.so | grep 'not found' \
 && /usr/local/bin/trident check-triton
LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true \
      com.amazonaws.sagemaker.capabilities.multi-models=true \
      com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true \
      org.opencontainers.image.title="trident" \
      org.opencontainers.image.description="NVIDIA Triton as a SageMaker inference container"
ENV TRITON_HOME=/opt/tritonserver
# mimalloc gives back what trident frees (bench/analysis.md, memory at rest).
ENV MIMALLOC_ARENA_EAGER_COMMIT=0
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/trident"]
CMD ["serve"]
