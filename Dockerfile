# genimpute with bcftools/tabix, Beagle 5.4 and shapeit4 (to phase unphased
# targets) and Minimac4 (with Beagle, for `genimpute benchmark`).
# CPU image by default; a CUDA image with
# --build-arg TORCH=cuda (PyPI's torch bundles the CUDA runtime; run with
# `docker run --gpus all`).
#
#   docker build -t genimpute:0.2.0 .
#   docker run --rm -v "$PWD:/data" genimpute:0.2.0 impute target.vcf.gz --model model
#   docker run --rm -v "$PWD:/data" genimpute:0.2.0 impute target.vcf.gz --ref panel.vcf.gz   (pretrained model)
#
# The test image (the same image plus the checkout's tests, examples,
# workflows and scripts, and shellcheck) runs the README's test command:
#
#   docker build --target test -t genimpute:test . && docker run --rm genimpute:test
#
# Build arguments, all optional:
#   BASE_IMAGE       any Debian bookworm image: the public python image by
#                    default; a plain Debian one (e.g. made with debootstrap,
#                    as benchmarks/container_build.sh does) works too, and
#                    then Debian's python3 (3.11) is used.
#   TORCH            cpu (default) or cuda.
#   TORCH_CPU_INDEX  where pip finds torch's CPU build (PyTorch's index by
#                    default); empty for none, when PIP_OPTIONS brings it.
#   PIP_OPTIONS      extra options for pip install, empty by default: e.g.
#                    "--find-links /mnt/wheels" with a wheel directory
#                    mounted there at build time (`podman build -v
#                    DIR:/mnt/wheels:ro`), for a mirror or an offline build,
#                    without naming any machine's paths here.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE} AS runtime

ARG TORCH=cpu
ARG TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
ARG PIP_OPTIONS=

# The python image has its own Python in /usr/local (with ensurepip); a plain
# Debian base has no Python, so it gets Debian's python3 and python3-venv.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bcftools tabix beagle minimac4 shapeit4 \
    && if ! python3 -c 'import ensurepip' 2>/dev/null; then \
           apt-get install -y --no-install-recommends python3 python3-venv; \
       fi \
    && rm -rf /var/lib/apt/lists/*

# genimpute goes into a virtual environment at a fixed path, on PATH, so that
# both bases behave alike: Debian's python3 refuses system-wide pip installs
# (PEP 668, "externally managed"), and a venv keeps pip's packages apart from
# Debian's rather than overriding that with --break-system-packages.
ENV VIRTUAL_ENV=/opt/venv
ENV PATH=/opt/venv/bin:$PATH
RUN python3 -m venv "$VIRTUAL_ENV"

WORKDIR /opt/genimpute
COPY pyproject.toml README.md constraints-cpu.txt ./
COPY genimpute ./genimpute

# CPU: the README's install line; the extra index supplies torch's CPU build
# for the version constraints-cpu.txt pins. PIP_OPTIONS is split into words
# on purpose (several options).
ENV PIP_NO_CACHE_DIR=1
RUN if [ "$TORCH" = "cpu" ]; then \
        PIP_EXTRA_INDEX_URL=$TORCH_CPU_INDEX pip install -c constraints-cpu.txt -e '.[dev,learned]' $PIP_OPTIONS; \
    else \
        pip install -e '.[dev,learned]' $PIP_OPTIONS; \
    fi

RUN useradd --create-home --uid 1000 genimpute && chown -R genimpute /opt/genimpute/genimpute
USER genimpute
# numba compiles the copying engine, the VCF writer and the phaser on first
# use (about a minute; the same code for panels of every size) and caches the
# machine code beside the sources. Compiled here, once, by the user who runs
# them, every `docker run` (a fresh container) starts warm on a machine of the
# build's CPU type (another type compiles again, as numba keys its cache on
# the CPU).
# The example panel is imputed from its VCF, then converted to a compact
# panel and imputed from that, whose coding and decoding are numba's too;
# then the example targets, their phase taken away, are phased with
# genimpute's own phaser (`--phaser genimpute`, numba's as well) and imputed.
RUN --mount=type=bind,source=examples/data,target=/tmp/warm \
    genimpute -q impute /tmp/warm/targets.omni2.5.vcf.gz --ref /tmp/warm/panel.vcf.gz \
        --map /tmp/warm/plink.chr20_8.9-9.4Mb.GRCh37.map --out /tmp/warm-up.vcf.gz \
    && genimpute -q panel /tmp/warm/panel.vcf.gz --map /tmp/warm/plink.chr20_8.9-9.4Mb.GRCh37.map \
        --out /tmp/warm-up.gpanel \
    && genimpute -q impute /tmp/warm/targets.omni2.5.vcf.gz --ref /tmp/warm-up.gpanel \
        --out /tmp/warm-up.vcf.gz --force \
    && gzip -dc /tmp/warm/targets.omni2.5.vcf.gz | sed '/^#/!s/|/\//g' > /tmp/warm-up.unphased.vcf \
    && genimpute -q impute /tmp/warm-up.unphased.vcf --ref /tmp/warm-up.gpanel --phaser genimpute \
        --out /tmp/warm-up.vcf.gz --force \
    && rm /tmp/warm-up.vcf.gz /tmp/warm-up.vcf.gz.tbi /tmp/warm-up.gpanel /tmp/warm-up.unphased.vcf
WORKDIR /data
ENTRYPOINT ["genimpute"]
CMD ["--help"]

# Test image: `python -m pytest -q` in the checkout, against the genimpute
# installed above. tests/test_workflows.py lints the shell scripts, hence
# shellcheck, and GNU time for the benchmarks' shell helpers that a test runs
# (benchmarks/lib.sh); the tests read README.md, the Dockerfile, examples/,
# workflows/, benchmarks/ and .ci/, hence the whole build context (less
# .dockerignore).
FROM runtime AS test
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends shellcheck time \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/genimpute
COPY . ./
# pytest and hypothesis keep their caches in the working directory
RUN chown genimpute:genimpute /opt/genimpute
USER genimpute
ENTRYPOINT []
CMD ["python", "-m", "pytest", "-q"]

# The default target (a plain `docker build .` builds the last stage): the
# runtime image above, without the tests.
FROM runtime
