module operator-host.dev/sdk

go 1.26
