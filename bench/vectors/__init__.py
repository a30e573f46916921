"""Vector search and the local embedder, measured: ``python -m bench.vectors``.

Nearest-neighbour search of 20 query vectors against N stored 384-d vectors, numpy over a float16
matrix (:func:`dreamer.embeddings.vectors.top_k`) beside sqlite-vec; the in-process embedder's cost;
and the embedded store's recall at N units with and without vectors. Each measurement runs in a
fresh child process, so its cold start and its memory are its own.
"""
