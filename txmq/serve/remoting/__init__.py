"""RocketMQ's remoting protocol (the 4.x wire) in front of the same broker as the gRPC front end."""
