# trident on NVIDIA's Triton image: trident replaces Triton's own SageMaker frontend and drives
# the image's Triton core in-process.
#   docker build -t trident .
#   docker run --gpus all -p 8080:8080 -v $PWD/examples/models:/opt/ml/model trident serve
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:24.10-py3

FROM ${TRITON_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl build-essential libclang-dev \
 && rm -rf /var/lib/apt/lists/*
ENV PATH=/root/.cargo/bin:${PATH}
WORKDIR /src
# The toolchain pinned in rust-toolchain.toml (rustup installs what the file names).
COPY rust-toolchain.toml .
RUN curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal --default-toolchain none \
 && rustup toolchain install
COPY . .
# Bindings from the image's own tritonserver.h rather than trident's declarations.
RUN TRITON_INCLUDE_DIR=/opt/tritonserver/include cargo build --release --locked \
 && install -m 0755 target/release/trident /usr/local/bin/trident

FROM ${TRITON_IMAGE}
LABEL com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true \
      com.amazonaws.sagemaker.capabilities.multi-models=true \
      com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true
COPY --from=build /usr/local/bin/trident /usr/local/bin/trident
ENV TRITON_HOME=/opt/tritonserver
ENTRYPOINT ["/usr/local/bin/trident"]
CMD ["serve"]
