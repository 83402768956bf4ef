import os

import afe_sandbox

afe = afe_sandbox.Client(namespace=os.environ.get("AFE_NAMESPACE", "default"))
afe.create_ticket("fix-1234", image="afe/busybox:dev", egress=["allowed.test"])
out = afe.run("fix-1234", script='n=$(timeout 20 wget -qO- http://allowed.test/ | wc -c); echo "{\\"bytes\\": $n}"')
print(out.exit_code, out.result["bytes"])
afe.finish("fix-1234")
