"""Producer and consumer APIs, named as in RocketMQ's Java client, spelled the Python way."""
