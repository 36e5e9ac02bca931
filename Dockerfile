# genimpute with bcftools/tabix, Beagle 5.4 and shapeit4 (to phase unphased
# targets) and Minimac4 (with Beagle, for `genimpute benchmark`).
# CPU image by default; a CUDA image with
# --build-arg TORCH=cuda (PyPI's torch bundles the CUDA runtime; run with
# `docker run --gpus all`).
#
#   docker build -t genimpute:0.1.0 .
#   docker run --rm -v "$PWD:/data" genimpute:0.1.0 impute target.vcf.gz --model model
#   docker run --rm -v "$PWD:/data" genimpute:0.1.0 impute target.vcf.gz --ref panel.vcf.gz   (pretrained model)
FROM python:3.11-slim-bookworm

ARG TORCH=cpu

RUN apt-get update \
    && apt-get install -y --no-install-recommends bcftools tabix beagle minimac4 shapeit4 \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/genimpute
COPY pyproject.toml README.md constraints-cpu.txt ./
COPY genimpute ./genimpute

# CPU: the README's install line; the extra index supplies torch's CPU build
# for the version constraints-cpu.txt pins.
ENV PIP_NO_CACHE_DIR=1
RUN if [ "$TORCH" = "cpu" ]; then \
        PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu pip install -c constraints-cpu.txt -e '.[dev]'; \
    else \
        pip install -e '.[dev]'; \
    fi

RUN useradd --create-home --uid 1000 genimpute
USER genimpute
WORKDIR /data
ENTRYPOINT ["genimpute"]
CMD ["--help"]
