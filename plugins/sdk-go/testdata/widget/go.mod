module example.com/widget

go 1.26

require operator-host.dev/sdk v0.0.0

replace operator-host.dev/sdk => ../..
