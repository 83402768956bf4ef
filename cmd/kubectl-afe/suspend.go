package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// suspendPatch is the merge patch of `kubectl afe suspend|resume`: it sets
// spec.suspend and, for a resume, the annotation that asks the controller
// to resume a sandbox its idle timeout suspended (whose spec.suspend is
// already false).
func suspendPatch(suspend bool, now time.Time) ([]byte, error) {
	p := map[string]any{}
	if !suspend {
		p = afev1.ResumeRequestPatch(now)
	}
	p["spec"] = map[string]any{"suspend": suspend}
	return json.Marshal(p)
}

// suspendCommand suspends or resumes a sandbox through the Kubernetes API,
// as the caller (it needs patch on sandboxes, nothing of Docker).
func suspendCommand(c client.Client, ns string, args []string, suspend bool, stdout io.Writer) error {
	verb := map[bool]string{true: "suspend", false: "resume"}[suspend]
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one SANDBOX", verb)
	}
	patch, err := suspendPatch(suspend, time.Now())
	if err != nil {
		return err
	}
	sbx := &afev1.Sandbox{}
	sbx.Namespace, sbx.Name = ns, args[0]
	ctx := context.Background()
	if err := c.Patch(ctx, sbx, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("%s sandbox/%s: %w", verb, args[0], err)
	}
	_, _ = fmt.Fprintf(stdout, "sandbox/%s %sed\n", sbx.Name, map[bool]string{true: "suspend", false: "resum"}[suspend])
	return nil
}
