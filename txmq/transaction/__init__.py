"""The transactional layer: half rewrite, end-transaction, Op batching, half cache, check service."""
