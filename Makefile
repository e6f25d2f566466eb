# corpusforge: two commands.
#   make demo   create .venv if missing, install, run the pipelines on data_samples/, print where the output is
#   make test   create .venv if missing, install, run the test suite
#
# Installing is idempotent: .venv/.installed records the last install and is redone only when
# pyproject.toml changes. Torch is installed first from the CPU wheel (a plain `torch`
# requirement would pull several GB of CUDA packages on Linux); on a GPU machine set
# TORCH_SPEC, e.g. `make demo TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"`.

PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
PY         := $(VENV)/bin/python
STAMP      := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test testdeps install sysdeps samples clean bench bench-env

install: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory sysdeps
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check $(TORCH_SPEC)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[test]"
	@touch $(STAMP)

# open3d's Linux wheels link libusb-1.0; Debian/Ubuntu servers often lack it.
sysdeps:
	@if ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing libusb-1.0-0 (needed by open3d)"; \
		(apt-get install -y -qq libusb-1.0-0 >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null && apt-get install -y -qq libusb-1.0-0 >/dev/null)); \
	else \
		echo "ERROR: open3d needs the system library libusb-1.0 (Debian/Ubuntu: sudo apt-get install libusb-1.0-0)"; exit 1; \
	fi

demo: $(STAMP)
	@rm -rf out/demo
	$(VENV)/bin/corpusforge run data_samples/configs/demo_text.yaml
	$(VENV)/bin/corpusforge train-tokenizer out/demo/text --vocab-size 4000
	$(VENV)/bin/corpusforge run data_samples/configs/demo_tokenize.yaml -q
	$(VENV)/bin/corpusforge mix data_samples/configs/demo_mix.yaml
	$(VENV)/bin/corpusforge mix search data_samples/configs/demo_mix_search.yaml
	$(VENV)/bin/corpusforge train trainer/configs/demo.yaml
	$(VENV)/bin/corpusforge compress quantize trainer/configs/compress_demo.yaml
	$(VENV)/bin/corpusforge run data_samples/configs/demo_images.yaml -q
	$(VENV)/bin/corpusforge run data_samples/configs/demo_pointclouds.yaml -q
	$(VENV)/bin/corpusforge run data_samples/configs/demo_acquire_text.yaml -q
	$(VENV)/bin/corpusforge run data_samples/configs/demo_acquire_images.yaml -q
	$(VENV)/bin/corpusforge run data_samples/configs/demo_acquire_pointclouds.yaml -q
	$(VENV)/bin/corpusforge validate out/demo/text
	$(VENV)/bin/corpusforge inspect out/demo/text --rows 1
	$(VENV)/bin/corpusforge run data_samples/configs/demo_sft.yaml -q
	$(VENV)/bin/corpusforge finetune trainer/configs/finetune_demo.yaml
	@echo
	@echo "Demo output:"
	@echo "  text:         out/demo/text/_manifest.json   (rejected rows: out/demo/text/_rejected/, stats: out/demo/text/_stats.json)"
	@echo "  tokens:       out/demo/tokens/_manifest.json (tokenizer: out/demo/tokens/tokenizer.json)"
	@echo "  training set: out/demo/mix/_manifest.json (mixed by token share, curriculum order)"
	@echo "  mix search:   out/demo/mix_search/mix.yaml (weights chosen by 14 proxy models; report.html beside it)"
	@echo "  training run: out/demo/train (metrics.jsonl, summary.json, checkpoints/, tensorboard/)"
	@echo "  compressed:   out/demo/compress (int8 weight-only model + report.md)"
	@echo "  fine-tuned:   out/demo/finetune (LoRA on the demo conversations: adapter.pt, summary.json, merged/)"
	@echo "Reports (open in a browser, offline):"
	@echo "  out/demo/text/_report.html  out/demo/mix/_report.html  out/demo/images/_report.html  out/demo/pointclouds/_report.html"
	@echo "  images:       out/demo/images/_manifest.json"
	@echo "  acquisition:  out/demo/acquire/{text,images,pointclouds} (WARC, chats, CSV, save_to_disk, COCO, tar, KITTI, LAZ, meshes)"
	@echo "  point clouds: out/demo/pointclouds/_manifest.json"

test: $(STAMP) testdeps
	$(PY) -m pytest -q -n 2 --dist loadfile $(PYTEST_ARGS)

# Headless Chromium for the report test (Debian's package; the test skips where it is absent).
testdeps:
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium (headless browser for the report test)"; \
		(apt-get install -y -qq chromium >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null)) || echo "chromium unavailable: the browser test will skip"; \
	else echo "no chromium: the report's browser test will skip"; fi

samples: $(STAMP)
	$(PY) data_samples/make_samples.py

bench: $(STAMP)
	$(PY) bench/bench_io.py

clean:
	rm -rf out .pytest_cache bench/_data bench/_out

# datatrove in its own environment, only for the side-by-side benchmarks (never a dependency:
# it pins xxhash<4). Its English tokenizer is spaCy's blank model: nothing is downloaded.
bench-env:
	test -x bench/.venv-datatrove/bin/python || $(PYTHON) -m venv bench/.venv-datatrove
	bench/.venv-datatrove/bin/pip install -q "datatrove==0.10.1" "xxhash<4" regex spacy nltk tokenizers
