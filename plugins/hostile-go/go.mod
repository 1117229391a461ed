module operator-host.dev/plugins/hostile

go 1.26

require operator-host.dev/sdk v0.0.0

replace operator-host.dev/sdk => ../sdk-go
