console.log("svc: starting")
