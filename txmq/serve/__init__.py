"""``txmq serve``: the RocketMQ 5.x gRPC front end over the broker (docs/serve.md)."""
